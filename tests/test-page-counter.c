/* SPDX-License-Identifier: MIT */
/*
 * test-page-counter.c - unit tests of page_counter (mm/page_counter.c
 * semantics): hierarchical charging and failure, uncharge underflow,
 * watermark, setters, and concurrent charging from several threads.
 *
 * Built twice: tests/test-page-counter against libmbcore.la (the padded
 * layout) and tests/test-page-counter-unpadded, from this same file with
 * -DPAGE_COUNTER_UNPADDED, against libmbcore-unpadded.la, so that the layout
 * the benchmark compares behaves the same.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "page_counter.h"

#define CACHELINE_BYTES 64
#define LINE_OF(field) (offsetof(struct page_counter, field) / CACHELINE_BYTES)

/* The layout claim of the kernel's page_counter rearrangement, checked at compile time. */
_Static_assert(_Alignof(struct page_counter) == CACHELINE_BYTES, "counters start on a cache line");
_Static_assert(sizeof(struct page_counter) % CACHELINE_BYTES == 0, "counters fill whole cache lines");
#ifdef PAGE_COUNTER_UNPADDED
_Static_assert(LINE_OF(usage) == LINE_OF(max), "unpadded: usage shares the line of max");
#else
_Static_assert(LINE_OF(usage) != LINE_OF(max), "padded: usage is away from max");
_Static_assert(LINE_OF(usage) != LINE_OF(high), "padded: usage is away from high");
_Static_assert(LINE_OF(usage) != LINE_OF(parent), "padded: usage is away from parent");
#endif

static bool same_line(const void *a, const void *b) {
        return (uintptr_t) a / CACHELINE_BYTES == (uintptr_t) b / CACHELINE_BYTES;
}

START_TEST(test_layout) {
        struct page_counter stack, *heap, *instances[2];

        heap = aligned_alloc(PAGE_COUNTER_ALIGN_BYTES, sizeof(*heap));
        ck_assert_ptr_nonnull(heap);
        instances[0] = &stack;
        instances[1] = heap;

        /* Real instances, on the stack and on the heap. */
        for (size_t i = 0; i < 2; i++) {
                struct page_counter *c = instances[i];

                ck_assert_uint_eq((uintptr_t) c % CACHELINE_BYTES, 0);
#ifdef PAGE_COUNTER_UNPADDED
                /* The Linux 5.19 layout: charges and limit readers collide. */
                ck_assert(same_line(&c->usage, &c->max));
                ck_assert(same_line(&c->usage, &c->high));
                ck_assert(same_line(&c->usage, &c->min));
                ck_assert(same_line(&c->usage, &c->low));
#else
                /* Every read-mostly field is off the line `usage` is on. */
                ck_assert(!same_line(&c->usage, &c->max));
                ck_assert(!same_line(&c->usage, &c->high));
                ck_assert(!same_line(&c->usage, &c->min));
                ck_assert(!same_line(&c->usage, &c->low));
                ck_assert(!same_line(&c->usage, &c->parent));
                ck_assert(!same_line(&c->usage, &c->protection_support));
                /* ... and so are the protection and peak fields. */
                ck_assert(!same_line(&c->usage, &c->emin));
                ck_assert(!same_line(&c->usage, &c->children_low_usage));
                ck_assert(!same_line(&c->usage, &c->watermark));
                ck_assert(!same_line(&c->watermark, &c->max));
                /* failcnt and underflows are written with usage only. */
                ck_assert(same_line(&c->usage, &c->failcnt));
                ck_assert(same_line(&c->usage, &c->underflows));
#endif
        }
        free(heap);
}
END_TEST

START_TEST(test_init_defaults) {
        struct page_counter root, child;

        page_counter_init(&root, NULL, true);
        page_counter_init(&child, &root, false);

        ck_assert_ptr_null(root.parent);
        ck_assert_ptr_eq(child.parent, &root);
        ck_assert(root.protection_support);
        ck_assert(!child.protection_support);
        ck_assert_uint_eq(page_counter_read(&child), 0);
        ck_assert_uint_eq(page_counter_get_max(&child), PAGE_COUNTER_MAX);
        ck_assert_uint_eq(page_counter_get_high(&child), PAGE_COUNTER_MAX);
        ck_assert_uint_eq(page_counter_get_min(&child), 0);
        ck_assert_uint_eq(page_counter_get_low(&child), 0);
        ck_assert_uint_eq(page_counter_get_watermark(&child), 0);
        ck_assert_uint_eq(page_counter_get_failcnt(&child), 0);
        ck_assert_uint_eq(page_counter_get_underflows(&child), 0);
}
END_TEST

START_TEST(test_charge_reaches_every_ancestor) {
        struct page_counter root, mid, leaf;

        page_counter_init(&root, NULL, true);
        page_counter_init(&mid, &root, true);
        page_counter_init(&leaf, &mid, true);

        ck_assert(page_counter_try_charge(&leaf, 7, NULL));
        page_counter_charge(&mid, 3);

        ck_assert_uint_eq(page_counter_read(&leaf), 7);
        ck_assert_uint_eq(page_counter_read(&mid), 10);
        ck_assert_uint_eq(page_counter_read(&root), 10);
        ck_assert_uint_eq(page_counter_get_watermark(&leaf), 7);
        ck_assert_uint_eq(page_counter_get_watermark(&mid), 10);
        ck_assert_uint_eq(page_counter_get_watermark(&root), 10);

        ck_assert(page_counter_uncharge(&leaf, 7));
        ck_assert_uint_eq(page_counter_read(&leaf), 0);
        ck_assert_uint_eq(page_counter_read(&mid), 3);
        ck_assert_uint_eq(page_counter_read(&root), 3);
}
END_TEST

/* root (max 1000) -> a (max 100) -> b -> c, plus a's other child s. */
struct four_levels {
        struct page_counter root, a, b, c, s;
};

static void four_levels_init(struct four_levels *t) {
        page_counter_init(&t->root, NULL, true);
        page_counter_init(&t->a, &t->root, true);
        page_counter_init(&t->b, &t->a, true);
        page_counter_init(&t->c, &t->b, true);
        page_counter_init(&t->s, &t->a, true);
        ck_assert_int_eq(page_counter_set_max(&t->root, 1000), 0);
        ck_assert_int_eq(page_counter_set_max(&t->a, 100), 0);
}

START_TEST(test_try_charge_fails_at_middle_ancestor) {
        struct page_counter *fail = NULL;
        struct four_levels t;

        four_levels_init(&t);
        /* Protected usage at c and b must be undone too. */
        ck_assert_int_eq(page_counter_set_min(&t.c, 10), 0);
        ck_assert_int_eq(page_counter_set_low(&t.b, 20), 0);

        ck_assert(page_counter_try_charge(&t.s, 60, &fail));
        ck_assert_ptr_null(fail);

        /* c and b have room, a does not: 60 + 50 > 100. */
        ck_assert(!page_counter_try_charge(&t.c, 50, &fail));
        ck_assert_ptr_eq(fail, &t.a);

        ck_assert_uint_eq(page_counter_read(&t.c), 0);
        ck_assert_uint_eq(page_counter_read(&t.b), 0);
        ck_assert_uint_eq(page_counter_read(&t.a), 60);
        ck_assert_uint_eq(page_counter_read(&t.root), 60);
        ck_assert_int_eq(atomic_load(&t.c.min_usage), 0);
        ck_assert_int_eq(atomic_load(&t.b.children_min_usage), 0);
        ck_assert_int_eq(atomic_load(&t.b.low_usage), 0);
        ck_assert_int_eq(atomic_load(&t.a.children_low_usage), 0);

        ck_assert_uint_eq(page_counter_get_failcnt(&t.c), 0);
        ck_assert_uint_eq(page_counter_get_failcnt(&t.b), 0);
        ck_assert_uint_eq(page_counter_get_failcnt(&t.a), 1);
        ck_assert_uint_eq(page_counter_get_failcnt(&t.root), 0);
        ck_assert_uint_eq(page_counter_get_underflows(&t.c), 0);
        ck_assert_uint_eq(page_counter_get_underflows(&t.b), 0);
}
END_TEST

START_TEST(test_try_charge_up_to_max_exactly) {
        struct page_counter *fail = NULL;
        struct four_levels t;

        four_levels_init(&t);
        ck_assert(page_counter_try_charge(&t.s, 60, &fail));

        /* usage == max is allowed, one more page is not. */
        ck_assert(page_counter_try_charge(&t.c, 40, &fail));
        ck_assert_uint_eq(page_counter_read(&t.a), 100);
        ck_assert(!page_counter_try_charge(&t.c, 1, &fail));
        ck_assert_ptr_eq(fail, &t.a);
        ck_assert_uint_eq(page_counter_read(&t.c), 40);
        ck_assert_uint_eq(page_counter_read(&t.a), 100);
        ck_assert_uint_eq(page_counter_get_failcnt(&t.a), 1);
}
END_TEST

START_TEST(test_try_charge_fails_at_root) {
        struct page_counter *fail = NULL;
        struct four_levels t;

        four_levels_init(&t);
        ck_assert_int_eq(page_counter_set_max(&t.a, PAGE_COUNTER_MAX), 0);

        ck_assert(!page_counter_try_charge(&t.c, 1001, &fail));
        ck_assert_ptr_eq(fail, &t.root);
        ck_assert_uint_eq(page_counter_read(&t.c), 0);
        ck_assert_uint_eq(page_counter_read(&t.b), 0);
        ck_assert_uint_eq(page_counter_read(&t.a), 0);
        ck_assert_uint_eq(page_counter_read(&t.root), 0);
        ck_assert_uint_eq(page_counter_get_failcnt(&t.root), 1);
        ck_assert_uint_eq(page_counter_get_failcnt(&t.a), 0);
}
END_TEST

START_TEST(test_try_charge_fails_at_self) {
        struct page_counter *fail = NULL;
        struct four_levels t;

        four_levels_init(&t);
        ck_assert_int_eq(page_counter_set_max(&t.c, 5), 0);

        ck_assert(!page_counter_try_charge(&t.c, 6, &fail));
        ck_assert_ptr_eq(fail, &t.c);
        ck_assert_uint_eq(page_counter_read(&t.c), 0);
        ck_assert_uint_eq(page_counter_read(&t.root), 0);
        ck_assert_uint_eq(page_counter_get_failcnt(&t.c), 1);

        /* @fail is optional. */
        ck_assert(!page_counter_try_charge(&t.c, 6, NULL));
        ck_assert_uint_eq(page_counter_get_failcnt(&t.c), 2);
}
END_TEST

START_TEST(test_uncharge_underflow_detected_and_clamped) {
        struct page_counter root, leaf, other;

        page_counter_init(&root, NULL, true);
        page_counter_init(&leaf, &root, true);
        page_counter_init(&other, &root, true);
        page_counter_charge(&leaf, 5);
        page_counter_charge(&other, 10);

        /* 8 > 5 at leaf: clamped to 0 and reported; root has 15, fine. */
        ck_assert(!page_counter_uncharge(&leaf, 8));
        ck_assert_uint_eq(page_counter_read(&leaf), 0);
        ck_assert_int_eq(atomic_load(&leaf.usage), 0);
        ck_assert_uint_eq(page_counter_get_underflows(&leaf), 1);
        ck_assert_uint_eq(page_counter_read(&root), 7);
        ck_assert_uint_eq(page_counter_get_underflows(&root), 0);

        /* Both levels underflow, every level is still uncharged. */
        ck_assert(!page_counter_uncharge(&other, 11));
        ck_assert_uint_eq(page_counter_read(&other), 0);
        ck_assert_uint_eq(page_counter_read(&root), 0);
        ck_assert_int_eq(atomic_load(&root.usage), 0);
        ck_assert_uint_eq(page_counter_get_underflows(&other), 1);
        ck_assert_uint_eq(page_counter_get_underflows(&root), 1);

        /* The counters still work afterwards. */
        page_counter_charge(&leaf, 3);
        ck_assert(page_counter_uncharge(&leaf, 3));
        ck_assert_uint_eq(page_counter_read(&root), 0);
        ck_assert_uint_eq(page_counter_get_underflows(&leaf), 1);
}
END_TEST

START_TEST(test_cancel_is_local) {
        struct page_counter root, leaf;

        page_counter_init(&root, NULL, true);
        page_counter_init(&leaf, &root, true);
        page_counter_charge(&leaf, 4);

        ck_assert(page_counter_cancel(&leaf, 4));
        ck_assert_uint_eq(page_counter_read(&leaf), 0);
        ck_assert_uint_eq(page_counter_read(&root), 4);
        ck_assert(!page_counter_cancel(&leaf, 1));
        ck_assert_uint_eq(page_counter_get_underflows(&leaf), 1);
        ck_assert_uint_eq(page_counter_read(&root), 4);
}
END_TEST

START_TEST(test_watermark_and_reset) {
        struct page_counter root, leaf;

        page_counter_init(&root, NULL, true);
        page_counter_init(&leaf, &root, true);

        ck_assert(page_counter_try_charge(&leaf, 10, NULL));
        ck_assert(page_counter_uncharge(&leaf, 4));
        ck_assert_uint_eq(page_counter_read(&leaf), 6);
        ck_assert_uint_eq(page_counter_get_watermark(&leaf), 10);
        ck_assert_uint_eq(page_counter_get_watermark(&root), 10);

        /* A charge below the peak leaves it alone. */
        ck_assert(page_counter_try_charge(&leaf, 2, NULL));
        ck_assert_uint_eq(page_counter_get_watermark(&leaf), 10);

        page_counter_reset_watermark(&leaf);
        ck_assert_uint_eq(page_counter_get_watermark(&leaf), 8);
        ck_assert_uint_eq(page_counter_get_watermark(&root), 10); /* not reset */

        page_counter_charge(&leaf, 1);
        ck_assert_uint_eq(page_counter_get_watermark(&leaf), 9);
}
END_TEST

START_TEST(test_setters_validate) {
        struct page_counter c;

        page_counter_init(&c, NULL, true);
        ck_assert_int_eq(page_counter_set_max(&c, 100), 0);
        ck_assert_int_eq(page_counter_set_high(&c, 90), 0);
        ck_assert_int_eq(page_counter_set_low(&c, 20), 0);
        ck_assert_int_eq(page_counter_set_min(&c, 10), 0);

        ck_assert_int_eq(page_counter_set_max(&c, PAGE_COUNTER_MAX + 1UL), -EINVAL);
        ck_assert_int_eq(page_counter_force_max(&c, PAGE_COUNTER_MAX + 1UL), -EINVAL);
        ck_assert_int_eq(page_counter_set_high(&c, PAGE_COUNTER_MAX + 1UL), -EINVAL);
        ck_assert_int_eq(page_counter_set_low(&c, ULONG_MAX), -EINVAL);
        ck_assert_int_eq(page_counter_set_min(&c, ULONG_MAX), -EINVAL);

        /* Rejected values change nothing. */
        ck_assert_uint_eq(page_counter_get_max(&c), 100);
        ck_assert_uint_eq(page_counter_get_high(&c), 90);
        ck_assert_uint_eq(page_counter_get_low(&c), 20);
        ck_assert_uint_eq(page_counter_get_min(&c), 10);

        /* PAGE_COUNTER_MAX itself means "max" and is accepted everywhere. */
        ck_assert_int_eq(page_counter_set_max(&c, PAGE_COUNTER_MAX), 0);
        ck_assert_int_eq(page_counter_force_max(&c, PAGE_COUNTER_MAX), 0);
        ck_assert_int_eq(page_counter_set_high(&c, PAGE_COUNTER_MAX), 0);
        ck_assert_int_eq(page_counter_set_low(&c, PAGE_COUNTER_MAX), 0);
        ck_assert_int_eq(page_counter_set_min(&c, PAGE_COUNTER_MAX), 0);
        ck_assert_uint_eq(page_counter_get_max(&c), PAGE_COUNTER_MAX);
        ck_assert_uint_eq(page_counter_get_min(&c), PAGE_COUNTER_MAX);
}
END_TEST

START_TEST(test_set_max_busy_below_usage) {
        struct page_counter root, leaf;

        page_counter_init(&root, NULL, true);
        page_counter_init(&leaf, &root, true);
        page_counter_charge(&leaf, 50);

        ck_assert_int_eq(page_counter_set_max(&leaf, 40), -EBUSY);
        ck_assert_uint_eq(page_counter_get_max(&leaf), PAGE_COUNTER_MAX);
        ck_assert_int_eq(page_counter_set_max(&root, 49), -EBUSY);

        /* Equal to usage is fine; then no more room. */
        ck_assert_int_eq(page_counter_set_max(&leaf, 50), 0);
        ck_assert_uint_eq(page_counter_get_max(&leaf), 50);
        ck_assert(!page_counter_try_charge(&leaf, 1, NULL));

        /* Raising always works. */
        ck_assert_int_eq(page_counter_set_max(&leaf, 60), 0);
        ck_assert(page_counter_try_charge(&leaf, 10, NULL));
}
END_TEST

START_TEST(test_force_max_below_usage) {
        struct page_counter *fail = NULL;
        struct page_counter root, leaf;

        page_counter_init(&root, NULL, true);
        page_counter_init(&leaf, &root, true);
        page_counter_charge(&leaf, 50);

        ck_assert_int_eq(page_counter_force_max(&leaf, 40), 0);
        ck_assert_uint_eq(page_counter_get_max(&leaf), 40);
        ck_assert_uint_eq(page_counter_read(&leaf), 50); /* nothing taken away */

        ck_assert(!page_counter_try_charge(&leaf, 1, &fail));
        ck_assert_ptr_eq(fail, &leaf);
        ck_assert_uint_eq(page_counter_get_failcnt(&leaf), 1);

        /* "Reclaim" the excess and more: charging works again up to 40. */
        ck_assert(page_counter_uncharge(&leaf, 20));
        ck_assert(page_counter_try_charge(&leaf, 10, NULL));
        ck_assert_uint_eq(page_counter_read(&leaf), 40);
        ck_assert(!page_counter_try_charge(&leaf, 1, NULL));
}
END_TEST

START_TEST(test_protected_usage_propagation) {
        struct page_counter parent, c1, c2, child;

        page_counter_init(&parent, NULL, true);
        page_counter_init(&c1, &parent, true);
        page_counter_init(&c2, &parent, true);
        ck_assert_int_eq(page_counter_set_min(&c1, 30), 0);
        ck_assert_int_eq(page_counter_set_low(&c2, 20), 0);

        /* min_usage = min(usage, min), summed into the parent. */
        page_counter_charge(&c1, 50);
        ck_assert_int_eq(atomic_load(&c1.min_usage), 30);
        ck_assert_int_eq(atomic_load(&parent.children_min_usage), 30);
        ck_assert_int_eq(atomic_load(&c1.low_usage), 0);

        ck_assert(page_counter_try_charge(&c2, 10, NULL));
        ck_assert_int_eq(atomic_load(&c2.low_usage), 10);
        ck_assert_int_eq(atomic_load(&parent.children_low_usage), 10);

        ck_assert(page_counter_uncharge(&c1, 30)); /* usage 20 < min 30 */
        ck_assert_int_eq(atomic_load(&c1.min_usage), 20);
        ck_assert_int_eq(atomic_load(&parent.children_min_usage), 20);

        /* Changing the setting re-propagates at once. */
        ck_assert_int_eq(page_counter_set_min(&c1, 5), 0);
        ck_assert_int_eq(atomic_load(&c1.min_usage), 5);
        ck_assert_int_eq(atomic_load(&parent.children_min_usage), 5);
        ck_assert_int_eq(page_counter_set_low(&c2, 0), 0);
        ck_assert_int_eq(atomic_load(&parent.children_low_usage), 0);

        /* A counter without protection_support does not propagate. */
        page_counter_init(&child, &c2, false);
        atomic_store(&child.min, 100);
        page_counter_charge(&child, 10);
        ck_assert_int_eq(atomic_load(&child.min_usage), 0);
        ck_assert_int_eq(atomic_load(&c2.children_min_usage), 0);
}
END_TEST

/*
 * Concurrency.  Four threads (on however many CPUs there are) charge and
 * uncharge leaves of one tree.  Each thread does a deterministic random walk
 * of its own holding, so at the end every level's usage is known exactly.
 */
#define NTHREADS 4
#define OPS_TOTAL 1000000
#define HOLD_MAX_PAGES 64

/* Threads start together, so that they overlap even when each is short. */
static pthread_barrier_t start_line;

struct walker {
        struct page_counter *leaf;
        unsigned seed;
        unsigned long held;     /* pages this thread holds at the end */
        unsigned long failures; /* try_charge failures (must stay 0) */
        unsigned long bad_uncharges;
};

static unsigned xorshift(unsigned *s) {
        *s ^= *s << 13;
        *s ^= *s >> 17;
        *s ^= *s << 5;
        return *s;
}

static void *walker_run(void *p) {
        struct walker *w = p;

        pthread_barrier_wait(&start_line);
        for (unsigned i = 0; i < OPS_TOTAL / NTHREADS; i++) {
                unsigned r = xorshift(&w->seed);
                unsigned long n = 1 + r % 8;

                if (w->held < n || (w->held + n <= HOLD_MAX_PAGES && (r >> 8) % 2 == 0)) {
                        if (r % 16 == 0) {
                                page_counter_charge(w->leaf, n);
                        } else if (!page_counter_try_charge(w->leaf, n, NULL)) {
                                w->failures++;
                                continue;
                        }
                        w->held += n;
                } else {
                        if (!page_counter_uncharge(w->leaf, n))
                                w->bad_uncharges++;
                        w->held -= n;
                }
        }
        return NULL;
}

START_TEST(test_concurrent_charging_exact) {
        /* root -> a -> {l0, l1}; root -> b -> {l2, l3}. */
        struct page_counter root, a, b, leaves[NTHREADS];
        struct page_counter *mid[NTHREADS] = { &a, &a, &b, &b };
        struct walker w[NTHREADS];
        pthread_t th[NTHREADS];
        unsigned long held_a, held_b;

        page_counter_init(&root, NULL, true);
        page_counter_init(&a, &root, true);
        page_counter_init(&b, &root, true);
        /* Limits that the walks can never hit, speculative charges included:
         * every charge must succeed. */
        ck_assert_int_eq(page_counter_set_max(&root, NTHREADS * HOLD_MAX_PAGES), 0);
        ck_assert_int_eq(page_counter_set_max(&a, 2 * HOLD_MAX_PAGES), 0);
        ck_assert_int_eq(page_counter_set_max(&b, 2 * HOLD_MAX_PAGES), 0);
        /* Protection at the middle level, where two threads propagate into
         * the same parent concurrently. */
        ck_assert_int_eq(page_counter_set_min(&a, HOLD_MAX_PAGES), 0);
        ck_assert_int_eq(page_counter_set_low(&b, HOLD_MAX_PAGES), 0);
        for (int i = 0; i < NTHREADS; i++) {
                page_counter_init(&leaves[i], mid[i], true);
                ck_assert_int_eq(page_counter_set_max(&leaves[i], HOLD_MAX_PAGES), 0);
                ck_assert_int_eq(page_counter_set_min(&leaves[i], HOLD_MAX_PAGES / 2), 0);
                ck_assert_int_eq(page_counter_set_low(&leaves[i], HOLD_MAX_PAGES / 4), 0);
                w[i] = (struct walker) { .leaf = &leaves[i], .seed = 2463534242U + 7919U * i };
        }

        ck_assert_int_eq(pthread_barrier_init(&start_line, NULL, NTHREADS), 0);
        for (int i = 0; i < NTHREADS; i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, walker_run, &w[i]), 0);
        for (int i = 0; i < NTHREADS; i++)
                ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        pthread_barrier_destroy(&start_line);

        held_a = w[0].held + w[1].held;
        held_b = w[2].held + w[3].held;
        for (int i = 0; i < NTHREADS; i++) {
                ck_assert_uint_eq(w[i].failures, 0);
                ck_assert_uint_eq(w[i].bad_uncharges, 0);
                ck_assert_uint_eq(page_counter_read(&leaves[i]), w[i].held);
                ck_assert_uint_eq(page_counter_get_failcnt(&leaves[i]), 0);
                ck_assert_uint_eq(page_counter_get_underflows(&leaves[i]), 0);
                ck_assert_uint_ge(page_counter_get_watermark(&leaves[i]), w[i].held);
                ck_assert_uint_le(page_counter_get_watermark(&leaves[i]), HOLD_MAX_PAGES);
        }
        ck_assert_uint_eq(page_counter_read(&a), held_a);
        ck_assert_uint_eq(page_counter_read(&b), held_b);
        ck_assert_uint_eq(page_counter_read(&root), held_a + held_b);
        ck_assert_uint_ge(page_counter_get_watermark(&a), held_a);
        ck_assert_uint_le(page_counter_get_watermark(&a), 2 * HOLD_MAX_PAGES);
        ck_assert_uint_ge(page_counter_get_watermark(&root), held_a + held_b);
        ck_assert_uint_le(page_counter_get_watermark(&root), NTHREADS * HOLD_MAX_PAGES);
        ck_assert_uint_eq(page_counter_get_failcnt(&a) + page_counter_get_failcnt(&b) +
                          page_counter_get_failcnt(&root), 0);
        ck_assert_uint_eq(page_counter_get_underflows(&root), 0);

        /* The xchg in propagate_protected_usage() keeps the parents' sums
         * exact even when a child's own value is momentarily stale. */
        ck_assert_int_eq(atomic_load(&root.children_min_usage),
                         atomic_load(&a.min_usage) + atomic_load(&b.min_usage));
        ck_assert_int_eq(atomic_load(&root.children_low_usage),
                         atomic_load(&a.low_usage) + atomic_load(&b.low_usage));
        ck_assert_int_le(atomic_load(&a.min_usage), HOLD_MAX_PAGES);
        ck_assert_int_eq(atomic_load(&a.children_min_usage),
                         atomic_load(&leaves[0].min_usage) + atomic_load(&leaves[1].min_usage));
        ck_assert_int_eq(atomic_load(&b.children_low_usage),
                         atomic_load(&leaves[2].low_usage) + atomic_load(&leaves[3].low_usage));
        /* Re-setting min resynchronises the stale ones exactly. */
        for (int i = 0; i < NTHREADS; i++) {
                unsigned long held = w[i].held, min = HOLD_MAX_PAGES / 2;

                ck_assert_int_le(atomic_load(&leaves[i].min_usage), (long) min);
                ck_assert_int_eq(page_counter_set_min(&leaves[i], min), 0);
                ck_assert_int_eq(atomic_load(&leaves[i].min_usage), (long) (held < min ? held : min));
        }
        ck_assert_int_eq(atomic_load(&a.children_min_usage),
                         atomic_load(&leaves[0].min_usage) + atomic_load(&leaves[1].min_usage));
        ck_assert_int_eq(atomic_load(&b.children_min_usage),
                         atomic_load(&leaves[2].min_usage) + atomic_load(&leaves[3].min_usage));
}
END_TEST

/*
 * Charges that must fail at max.  Every thread charges 8 pages at a time
 * until a charge fails, then gives back half of what it holds.  `held_total`
 * counts committed pages: raised after a successful charge, lowered before
 * the uncharge, so it never exceeds what is committed in the counter.
 */
#define LIMITED_MAX_PAGES 1024
#define LIMITED_BATCH_PAGES 8
#define LIMITED_ITERATIONS 100000

struct limited {
        struct page_counter root, a, leaves[NTHREADS];
        _Atomic unsigned long held_total;
        _Atomic bool done;
        /* what the observer saw */
        unsigned long samples, held_over_max, usage_over_bound;
};

struct charger {
        struct limited *l;
        struct page_counter *leaf;
        unsigned long held, failures, wrong_fail;
};

static void *charger_run(void *p) {
        struct charger *c = p;

        pthread_barrier_wait(&start_line);
        for (unsigned i = 0; i < LIMITED_ITERATIONS; i++) {
                struct page_counter *fail = NULL;

                if (page_counter_try_charge(c->leaf, LIMITED_BATCH_PAGES, &fail)) {
                        c->held += LIMITED_BATCH_PAGES;
                        atomic_fetch_add(&c->l->held_total, LIMITED_BATCH_PAGES);
                } else {
                        unsigned long give = c->held / 2 / LIMITED_BATCH_PAGES * LIMITED_BATCH_PAGES;

                        c->failures++;
                        if (fail != &c->l->a)
                                c->wrong_fail++;
                        atomic_fetch_sub(&c->l->held_total, give);
                        page_counter_uncharge(c->leaf, give);
                        c->held -= give;
                }
        }
        return NULL;
}

static void *observer_run(void *p) {
        struct limited *l = p;

        do {
                unsigned long held = atomic_load(&l->held_total);
                unsigned long usage = page_counter_read(&l->a);

                l->samples++;
                /* Committed usage never passes max. */
                if (held > LIMITED_MAX_PAGES)
                        l->held_over_max++;
                /* The raw counter may only overshoot by the speculative
                 * charges in flight, one per thread. */
                if (usage > LIMITED_MAX_PAGES + NTHREADS * LIMITED_BATCH_PAGES)
                        l->usage_over_bound++;
        } while (!atomic_load(&l->done));
        return NULL;
}

START_TEST(test_concurrent_charges_fail_at_max) {
        struct limited *l;
        struct charger c[NTHREADS];
        pthread_t th[NTHREADS], obs;
        unsigned long failures = 0, held = 0;

        l = aligned_alloc(PAGE_COUNTER_ALIGN_BYTES, sizeof(*l));
        ck_assert_ptr_nonnull(l);
        *l = (struct limited) {};
        page_counter_init(&l->root, NULL, true);
        page_counter_init(&l->a, &l->root, true);
        ck_assert_int_eq(page_counter_set_max(&l->a, LIMITED_MAX_PAGES), 0);
        for (int i = 0; i < NTHREADS; i++) {
                page_counter_init(&l->leaves[i], &l->a, true);
                c[i] = (struct charger) { .l = l, .leaf = &l->leaves[i] };
        }

        ck_assert_int_eq(pthread_barrier_init(&start_line, NULL, NTHREADS), 0);
        ck_assert_int_eq(pthread_create(&obs, NULL, observer_run, l), 0);
        for (int i = 0; i < NTHREADS; i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, charger_run, &c[i]), 0);
        for (int i = 0; i < NTHREADS; i++)
                ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        pthread_barrier_destroy(&start_line);
        atomic_store(&l->done, true);
        ck_assert_int_eq(pthread_join(obs, NULL), 0);

        for (int i = 0; i < NTHREADS; i++) {
                failures += c[i].failures;
                held += c[i].held;
                ck_assert_uint_eq(c[i].wrong_fail, 0);
                ck_assert_uint_eq(page_counter_read(&l->leaves[i]), c[i].held);
                ck_assert_uint_eq(page_counter_get_failcnt(&l->leaves[i]), 0);
        }
        /* Every thread keeps charging until it fails, so failures happen. */
        ck_assert_uint_ge(failures, NTHREADS);
        ck_assert_uint_eq(page_counter_get_failcnt(&l->a), failures);
        ck_assert_uint_eq(page_counter_get_failcnt(&l->root), 0);

        ck_assert_uint_gt(l->samples, 0);
        ck_assert_uint_eq(l->held_over_max, 0);
        ck_assert_uint_eq(l->usage_over_bound, 0);

        ck_assert_uint_eq(atomic_load(&l->held_total), held);
        ck_assert_uint_eq(page_counter_read(&l->a), held);
        ck_assert_uint_eq(page_counter_read(&l->root), held);
        ck_assert_uint_le(held, LIMITED_MAX_PAGES);
        ck_assert_uint_le(page_counter_get_watermark(&l->a), LIMITED_MAX_PAGES);
        ck_assert_uint_ge(page_counter_get_watermark(&l->a), held);
        ck_assert_uint_eq(page_counter_get_underflows(&l->a), 0);
        free(l);
}
END_TEST

/*
 * page_counter_set_max() racing with chargers: once it returns 0, committed
 * usage stays within the new limit.  Two threads charge one page at a time
 * and give back everything when a charge fails, so usage keeps cycling and
 * the setter eventually finds usage below its target.
 */
struct racer {
        struct limited *l;
        struct page_counter *leaf;
        unsigned long held;
};

static void *racer_run(void *p) {
        struct racer *r = p;

        while (!atomic_load(&r->l->done)) {
                if (page_counter_try_charge(r->leaf, 1, NULL)) {
                        r->held++;
                        atomic_fetch_add(&r->l->held_total, 1);
                } else {
                        atomic_fetch_sub(&r->l->held_total, r->held);
                        page_counter_uncharge(r->leaf, r->held);
                        r->held = 0;
                }
        }
        return NULL;
}

START_TEST(test_set_max_races_with_charges) {
        static const unsigned long targets[] = { 768, 512, 256, 128, 64, 32 };
        struct racer r[2];
        pthread_t th[2];
        struct limited *l;
        unsigned long violations = 0;

        l = aligned_alloc(PAGE_COUNTER_ALIGN_BYTES, sizeof(*l));
        ck_assert_ptr_nonnull(l);
        *l = (struct limited) {};
        page_counter_init(&l->root, NULL, true);
        page_counter_init(&l->a, &l->root, true);
        ck_assert_int_eq(page_counter_set_max(&l->a, LIMITED_MAX_PAGES), 0);
        for (int i = 0; i < 2; i++) {
                page_counter_init(&l->leaves[i], &l->a, true);
                r[i] = (struct racer) { .l = l, .leaf = &l->leaves[i] };
                ck_assert_int_eq(pthread_create(&th[i], NULL, racer_run, &r[i]), 0);
        }

        for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
                int ret;

                while ((ret = page_counter_set_max(&l->a, targets[t])) == -EBUSY)
                        sched_yield();
                ck_assert_int_eq(ret, 0);
                for (int s = 0; s < 20000; s++)
                        if (atomic_load(&l->held_total) > targets[t])
                                violations++;
        }
        atomic_store(&l->done, true);
        for (int i = 0; i < 2; i++)
                ck_assert_int_eq(pthread_join(th[i], NULL), 0);

        ck_assert_uint_eq(violations, 0);
        ck_assert_uint_eq(page_counter_read(&l->a), r[0].held + r[1].held);
        ck_assert_uint_le(page_counter_read(&l->a), targets[sizeof(targets) / sizeof(targets[0]) - 1]);
        free(l);
}
END_TEST

static Suite *page_counter_suite(void) {
        Suite *s = suite_create("page_counter");
        TCase *tc = tcase_create("page_counter");

        tcase_add_test(tc, test_layout);
        tcase_add_test(tc, test_init_defaults);
        tcase_add_test(tc, test_charge_reaches_every_ancestor);
        tcase_add_test(tc, test_try_charge_fails_at_middle_ancestor);
        tcase_add_test(tc, test_try_charge_up_to_max_exactly);
        tcase_add_test(tc, test_try_charge_fails_at_root);
        tcase_add_test(tc, test_try_charge_fails_at_self);
        tcase_add_test(tc, test_uncharge_underflow_detected_and_clamped);
        tcase_add_test(tc, test_cancel_is_local);
        tcase_add_test(tc, test_watermark_and_reset);
        tcase_add_test(tc, test_setters_validate);
        tcase_add_test(tc, test_set_max_busy_below_usage);
        tcase_add_test(tc, test_force_max_below_usage);
        tcase_add_test(tc, test_protected_usage_propagation);
        tcase_add_test(tc, test_concurrent_charging_exact);
        tcase_add_test(tc, test_concurrent_charges_fail_at_max);
        tcase_add_test(tc, test_set_max_races_with_charges);
        /* The threaded tests take a second or two under ASan on 2 CPUs. */
        tcase_set_timeout(tc, 60);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(page_counter_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
