/* SPDX-License-Identifier: MIT */
/*
 * stock.c - the per-CPU stocks of charged pages (stock.h) and the page fast
 * paths: mb_page_alloc() and mb_page_free() pop or push a pointer on the
 * stock of the CPU they run on and write that CPU's stats slot in one
 * restartable sequence (rseq mode), or under the stock's lock (atomic
 * mode, and the bulk forms): no system call, no daemon.  The slow paths charge and return pages in batches
 * through the session (session.h) under conn_lock, as the kernel's
 * try_charge() and refill_stock() do for memcg_stock_pcp.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/client.h"
#include "macros.h"
#include "stock/reclaim.h"
#include "session/session.h"
#include "stock/stock.h"

bool stock_rseq_mode(void) {
        const char *e = getenv("MEMBROKER_RSEQ");

        if (e && strcmp(e, "0") == 0)
                return false;
        return pcpu_rseq_usable();
}

_Static_assert(2u * MB_CHARGE_MAX_PAGES + 1u <= STOCK_NR_MASK, "a stock's count fits its word");

/* ---- rseq mode: the sequences ---- */

enum { STOCK_RSEQ_DONE, STOCK_RSEQ_CHANGED, STOCK_RSEQ_ABORTED, STOCK_RSEQ_SLOW, STOCK_RSEQ_RESET };

#if PCPU_HAVE_RSEQ
/*
 * The restartable sequences of the stocks, x86-64.  Each publishes its
 * descriptor in rseq->rseq_cs (offset 8 of glibc's struct rseq, at
 * __rseq_offset from the thread pointer), compares rseq->cpu_id (offset 4)
 * with the CPU whose stock it works on, reads the stock word (or compares
 * it with the value it read before), and commits with the single store of
 * the new word.  The kernel moves a thread that is preempted, migrated or
 * signalled inside [1, 2) to the abort handler 4, which the signature
 * glibc registered precedes.
 */
#define STOCK_RSEQ_ENTER                                                       \
        PCPU_RSEQ_ENTER
#define STOCK_RSEQ_COMPARE                                                     \
        "cmpq %[exp], (%[w])\n\t"                                              \
        "jnz %l[changed]\n\t"
#define STOCK_RSEQ_LEAVE                                                       \
        "2:\n\t"                                                               \
        ".pushsection __rseq_failure, \"ax\"\n\t"                              \
        ".byte 0x0f, 0xb9, 0x3d\n\t"         /* ud1 <sig>(%%rip), %%edi */      \
        ".long 0x53053053\n\t"               /* PCPU_RSEQ_SIG */               \
        "4:\n\t"                                                               \
        "jmp %l[aborted]\n\t"                                                  \
        ".popsection\n\t"
/* The same for a sequence that writes the stats slot: %%rcx is 0 until it
 * holds the slot, right before the first store there; an abort before
 * that left nothing behind (%l[clean]). */
#define STOCK_RSEQ_LEAVE_SLOT                                                  \
        "2:\n\t"                                                               \
        ".pushsection __rseq_failure, \"ax\"\n\t"                              \
        ".byte 0x0f, 0xb9, 0x3d\n\t"         /* ud1 <sig>(%%rip), %%edi */      \
        ".long 0x53053053\n\t"               /* PCPU_RSEQ_SIG */               \
        "4:\n\t"                                                               \
        "testq %%rcx, %%rcx\n\t"                                               \
        "jz %l[clean]\n\t"                                                     \
        "jmp %l[aborted]\n\t"                                                  \
        ".popsection\n\t"

_Static_assert(PCPU_RSEQ_SIG == 0x53053053, "the signature in the abort handlers");

/* If the stock word of CPU @cpu is still @expect, store @next there. */
static inline __attribute__((always_inline)) int stock_rseq_cas(uint64_t *w, uint64_t expect, uint64_t next,
                                                                uint32_t cpu, ptrdiff_t area) {
        __asm__ __volatile__ goto(STOCK_RSEQ_ENTER STOCK_RSEQ_COMPARE
                                  "movq %[nxt], (%[w])\n\t"
                                  STOCK_RSEQ_LEAVE
                                  :
                                  : [off] "r"(area), [cpu] "r"(cpu), [w] "r"(w), [exp] "r"(expect), [nxt] "r"(next)
                                  : "memory", "cc", "rax"
                                  : changed, aborted);
        return STOCK_RSEQ_DONE;
changed:
        return STOCK_RSEQ_CHANGED;
aborted:
        return STOCK_RSEQ_ABORTED;
}

#define STOCK_SLOT_OFF(item) ((long) offsetof(struct mb_stat_slot, v) + (long) (item) * 8)

/*
 * One pop (@push 0: the page into @p) or push (@push 1: @p to pages[nr])
 * on the stock @s of CPU @cpu, as one sequence, as tcmalloc's per-CPU
 * caches do: it reads the word inside the sequence and leaves to %l[slow]
 * when it is locked, the stock empty (pop) or at its limit (push);
 * computes the slot's values from the word it will commit (stock.h); then,
 * in its last instructions, writes the slot, the region's dirty word when
 * `updates` passes a multiple of STOCK_STAT_DIRTY_UPDATES, and commits the
 * word moved on by one page and one operation.  Past STOCK_OPS_RESET
 * operations (checked with the dirty word) it leaves to %l[slow_reset]
 * instead of committing, after its slot stores: the caller settles the
 * stock, whose unlock starts the operations again.  An abort before the first
 * slot store goes to %l[clean] (nothing to settle), after it to
 * %l[aborted].  The slot, the page array and the bases are read from the
 * stock inside the sequence (they change only with the word).
 * @count_item is the counter of the operation, @k_count its base.
 */
#define STOCK_RSEQ_OP(push, count_item, k_count, page_constraint)                                               \
        __asm__ __volatile__ goto(                                                                              \
                "xorl %%ecx, %%ecx\n\t"                           /* no slot store yet */                       \
                STOCK_RSEQ_ENTER                                                                                \
                "movq (%[w]), %%rdx\n\t"                          /* rdx = word */                              \
                "testq %%rdx, %%rdx\n\t"                                                                        \
                "js %l[slow]\n\t"                                 /* locked */                                  \
                "movl %%edx, %%eax\n\t"                                                                         \
                "andl %[nrmask], %%eax\n\t"                       /* rax = nr before */                         \
                "movq %c[o_arr](%[w]), %%r8\n\t"                                                                \
                ".if " #push "\n\t"                                                                             \
                "cmpl %c[o_limit](%[w]), %%eax\n\t"                                                             \
                "jae %l[slow]\n\t"                                /* full */                                    \
                "movq %[pg], (%%r8,%%rax,8)\n\t"                  /* above nr: harmless until the commit */     \
                "incl %%eax\n\t"                                                                                \
                ".else\n\t"                                                                                     \
                "testl %%eax, %%eax\n\t"                                                                        \
                "jz %l[slow]\n\t"                                 /* empty */                                   \
                "movq -8(%%r8,%%rax,8), %[pg]\n\t"                                                              \
                "decl %%eax\n\t"                                                                                \
                ".endif\n\t"                                                                                    \
                "addq %[delta], %%rdx\n\t"                        /* rax = nr, rdx = word after */              \
                "movq %c[o_kstock](%[w]), %[off]\n\t"                                                           \
                "addq %%rax, %[off]\n\t"                          /* off = k_stock + nr */                      \
                "movq %%rdx, %%r8\n\t"                                                                          \
                "shrq %[nrbits], %%r8\n\t"                        /* r8 = ops after */                          \
                ".if " #push "\n\t"                                                                             \
                "addq %%r8, %%rax\n\t"                            /* ops + nr */                                \
                ".else\n\t"                                                                                     \
                "negq %%rax\n\t"                                                                                \
                "addq %%r8, %%rax\n\t"                            /* ops - nr */                                \
                ".endif\n\t"                                                                                    \
                "addq %c[o_kcount](%[w]), %%rax\n\t"                                                            \
                "sarq $1, %%rax\n\t"                              /* rax = the op's counter */                  \
                "addq %c[o_kupd](%[w]), %%r8\n\t"                 /* r8 = k_updates + ops */                    \
                "movq %c[o_slot](%[w]), %%rcx\n\t"                /* rcx = slot: stores from here */            \
                "movq %%rax, %c[o_count](%%rcx)\n\t"                                                            \
                "movq %[off], %c[o_stock](%%rcx)\n\t"                                                           \
                "movq %c[o_ktotal](%[w]), %%rax\n\t"                                                            \
                "subq %[off], %%rax\n\t"                                                                        \
                "movq %%rax, %c[o_pages](%%rcx)\n\t"              /* k_total - stock */                         \
                "movq %%r8, %c[o_upd](%%rcx)\n\t"                 /* updates last */                            \
                "testb %[dmask], %%r8b\n\t"                                                                     \
                "jnz 5f\n\t"                                                                                    \
                "btq %[resetbit], %%rdx\n\t"                      /* every 64th: ops to reset? */               \
                "jc %l[slow_reset]\n\t"                           /* (after the stores: settles) */             \
                "movl %[cpu], %%eax\n\t"                          /* the region's dirty word: */                \
                "shlq $7, %%rax\n\t"                              /* slot - cpu * 128 - 64 */                   \
                "negq %%rax\n\t"                                                                                \
                "addq %%rcx, %%rax\n\t"                                                                         \
                "cmpq $0, -64(%%rax)\n\t"                                                                       \
                "jnz 5f\n\t"                                                                                    \
                "movq $1, -64(%%rax)\n\t"                                                                       \
                "5:\n\t"                                                                                        \
                "movq %%rdx, (%[w])\n\t"                          /* commit */                                  \
                STOCK_RSEQ_LEAVE_SLOT                                                                           \
                : [pg] page_constraint(p), [off] "+r"(area)                                                     \
                : [cpu] "r"(cpu), [w] "r"(s),                                                                   \
                  [delta] "e"((int64_t) (push ? STOCK_OPS_ONE + 1 : STOCK_OPS_ONE - 1)),                        \
                  [nrmask] "i"(STOCK_NR_MASK), [nrbits] "i"(STOCK_NR_BITS),                                     \
                  [dmask] "i"(STOCK_STAT_DIRTY_UPDATES - 1), [resetbit] "i"(STOCK_OPS_RESET_BIT),               \
                  [o_arr] "i"(offsetof(struct stock, pages)), [o_slot] "i"(offsetof(struct stock, slot)),       \
                  [o_limit] "i"(offsetof(struct stock, limit)),                                                 \
                  [o_kpages] "i"(offsetof(struct stock, k_pages)),                                              \
                  [o_kstock] "i"(offsetof(struct stock, k_stock)),                                              \
                  [o_kcount] "i"(offsetof(struct stock, k_count)),                                              \
                  [o_kupd] "i"(offsetof(struct stock, k_updates)),                                              \
                  [o_ktotal] "i"(offsetof(struct stock, k_total)),                                              \
                  [o_pages] "i"(STOCK_SLOT_OFF(MB_STAT_PAGES)), [o_stock] "i"(STOCK_SLOT_OFF(MB_STAT_STOCK)),   \
                  [o_count] "i"(STOCK_SLOT_OFF(count_item)),                                                    \
                  [o_upd] "i"(offsetof(struct mb_stat_slot, updates))                                           \
                : "memory", "cc", "rax", "rcx", "rdx", "r8"                                                     \
                : slow, slow_reset, clean, aborted)

/* The ops bit that sends a sequence to an unlock (stock.h). */
#define STOCK_OPS_RESET_BIT (STOCK_NR_BITS + 40)
_Static_assert(STOCK_OPS_RESET == UINT64_C(1) << 40, "STOCK_OPS_RESET_BIT");
_Static_assert(offsetof(struct stock, word) == 0, "the sequences read (%[w])");
_Static_assert(sizeof(struct mb_stat_slot) == 128 && offsetof(struct mb_stats_region, slot) == 128 &&
                       offsetof(struct mb_stats_region, dirty) == 64,
               "the sequences find the dirty word at slot - cpu * 128 - 64");
_Static_assert(STOCK_STAT_DIRTY_UPDATES <= 256, "testb");

/* Pop one page from the stock of CPU @cpu in one sequence. */
static inline __attribute__((always_inline)) int stock_rseq_pop(const mb_client *c, unsigned cpu, void **ret) {
        struct stock *s = &c->stocks[cpu];
        ptrdiff_t area = c->rseq_area;
        void *p;

        STOCK_RSEQ_OP(0, MB_STAT_PGALLOC, k_alloc2, "=&r");
        *ret = p;
        return STOCK_RSEQ_DONE;
slow:
        return STOCK_RSEQ_SLOW;
slow_reset:
        return STOCK_RSEQ_RESET;
clean:
        return STOCK_RSEQ_CHANGED;
aborted:
        return STOCK_RSEQ_ABORTED;
}

/* Push @page to the stock of CPU @cpu in one sequence. */
static inline __attribute__((always_inline)) int stock_rseq_push(const mb_client *c, unsigned cpu, void *pg) {
        struct stock *s = &c->stocks[cpu];
        ptrdiff_t area = c->rseq_area;
        void *p = pg;

        STOCK_RSEQ_OP(1, MB_STAT_PGFREE, k_free2, "+r");
        return STOCK_RSEQ_DONE;
slow:
        return STOCK_RSEQ_SLOW;
slow_reset:
        return STOCK_RSEQ_RESET;
clean:
        return STOCK_RSEQ_CHANGED;
aborted:
        return STOCK_RSEQ_ABORTED;
}
#endif

/* rseq mode, the lock just taken: write the slot from the word and the
 * bases, so that values a sequence aborted before its commit may have left
 * there are gone, with `updates` two past the last value (such a sequence
 * may have written one past): the daemon folds the slot again. */
static void stock_materialize(const mb_client *c, struct stock *s) {
        uint64_t w = s->word;
        int64_t nr = (int64_t) (w & STOCK_NR_MASK);
        int64_t ops = (int64_t) ((w & ~(STOCK_W_LOCKED | STOCK_W_REMOTE)) >> STOCK_NR_BITS);
        struct mb_stat_slot *slot = s->slot;

        __atomic_store_n(&slot->v[MB_STAT_PAGES], s->k_pages - nr, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->v[MB_STAT_STOCK], s->k_stock + nr, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->v[MB_STAT_PGALLOC], (s->k_alloc2 + ops - nr) >> 1, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->v[MB_STAT_PGFREE], (s->k_free2 + ops + nr) >> 1, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->updates, s->k_updates + (uint64_t) ops + 2, __ATOMIC_RELEASE);
        stock_stat_dirty(c);
}

/* rseq mode, before the unlock: the bases for the word the unlock stores
 * (@nr pages, @ops operations), from the slot as the holder left it. */
static void stock_rebase(struct stock *s, int64_t nr, int64_t ops) {
        const struct mb_stat_slot *slot = s->slot;

        s->k_pages = __atomic_load_n(&slot->v[MB_STAT_PAGES], __ATOMIC_RELAXED) + nr;
        s->k_stock = __atomic_load_n(&slot->v[MB_STAT_STOCK], __ATOMIC_RELAXED) - nr;
        s->k_alloc2 = 2 * __atomic_load_n(&slot->v[MB_STAT_PGALLOC], __ATOMIC_RELAXED) - ops + nr;
        s->k_free2 = 2 * __atomic_load_n(&slot->v[MB_STAT_PGFREE], __ATOMIC_RELAXED) - ops - nr;
        s->k_updates = __atomic_load_n(&slot->updates, __ATOMIC_RELAXED) - (uint64_t) ops;
        s->k_total = s->k_pages + s->k_stock;
}

void stock_unlock(const mb_client *c, struct stock *s) {
        uint64_t w = s->word;
        uint64_t nr = w & STOCK_NR_MASK;
        uint64_t ops = ((w & ~(STOCK_W_LOCKED | STOCK_W_REMOTE)) >> STOCK_NR_BITS) + 1;

        stock_assert_locked(s);
        /* The word moves on at every unlock: a sequence that read it before
         * the lock does not commit after it. */
        if (ops >= STOCK_OPS_RESET)
                ops = 0;
        if (c->rseq_lock)
                stock_rebase(s, (int64_t) nr, (int64_t) ops);
        __atomic_store_n(&s->word, nr | ops << STOCK_NR_BITS, __ATOMIC_RELEASE);
}

/* Wait until the word of @s looks unlocked; returns it. */
static uint64_t stock_wait_unlocked(const struct stock *s) {
        for (;;) {
                uint64_t w;

                for (unsigned i = 0; i < PCPU_SPIN_LOOPS; i++) {
                        w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
                        if (!(w & STOCK_W_LOCKED))
                                return w;
                        pcpu_relax();
                }
                sched_yield();
        }
}

/* Atomic mode, or any remote locker: compare-and-swap of the lock bit.
 * Returns the word it stored. */
static uint64_t stock_lock_cas(struct stock *s, uint64_t bits) {
        uint64_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);

        for (;;) {
                if (w & STOCK_W_LOCKED)
                        w = stock_wait_unlocked(s);
                if (__atomic_compare_exchange_n(&s->word, &w, w | bits, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                        return w | bits;
        }
}

struct stock *stock_lock_cpu(const mb_client *c, unsigned cpu) {
        struct stock *s = &c->stocks[cpu];

        if (!c->rseq_lock) {
                stock_lock_cas(s, STOCK_W_LOCKED);
                return s;
        }
        for (;;) {
                /* The value the swap stored, not the word read again: a
                 * sequence that read the word before the swap may commit
                 * over it at any moment before the fence, and a second read
                 * would take its unlocked word for ours. */
                uint64_t w = stock_lock_cas(s, STOCK_W_LOCKED | STOCK_W_REMOTE);

                /* A sequence on @cpu may have read the word before the swap
                 * and not committed yet: abort it, then look. */
                pcpu_rseq_fence(cpu);
                /* Still our value: nobody committed over it.  No sequence
                 * writes REMOTE, and every commit and unlock moves ops on,
                 * so another remote locker cannot have stored this value. */
                if (__atomic_load_n(&s->word, __ATOMIC_ACQUIRE) == w) {
                        stock_materialize(c, s);
                        return s;
                }
        }
}

struct stock *stock_lock_this(const mb_client *c) {
#if PCPU_HAVE_RSEQ
        if (c->rseq_lock) {
                for (;;) {
                        uint32_t cpu = pcpu_rseq_cpu(c->rseq_offset);
                        struct stock *s;
                        uint64_t w;

                        if (cpu >= c->ncpus)
                                /* No valid rseq CPU for this thread. */
                                return stock_lock_cpu(c, pcpu_fallback_cpu(c->ncpus));
                        s = &c->stocks[cpu];
                        w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
                        if (w & STOCK_W_LOCKED) {
                                (void) stock_wait_unlocked(s);
                                continue;
                        }
                        /* A sequence of this CPU: the others of this CPU
                         * finished or restart, no fence needed. */
                        if (stock_rseq_cas(&s->word, w, w | STOCK_W_LOCKED, cpu, c->rseq_area) == STOCK_RSEQ_DONE) {
                                stock_materialize(c, s);
                                return s;
                        }
                }
        }
#endif
        {
                struct stock *s = &c->stocks[pcpu_current_cpu(c->rseq_offset, c->ncpus)];

                stock_lock_cas(s, STOCK_W_LOCKED);
                return s;
        }
}

void stock_take_locked(const mb_client *c, struct stock *s, void **out, uint32_t take) {
        stock_assert_locked(s);
        uint32_t nr = stock_nr(s) - take;

        stock_set_nr(s, nr);
        memcpy(out, s->pages + nr, take * sizeof(void *));
        stock_slot_add(s->slot, MB_STAT_STOCK, -(int64_t) take);
        stock_slot_commit(c, s, take);
}

void stock_disable_all(mb_client *c) {
        for (unsigned i = 0; i < c->ncpus; i++) {
                struct stock *s = stock_lock_cpu(c, i);

                stock_set_nr(s, 0);
                s->limit = 0;
                stock_unlock(c, s);
        }
        /* No stock takes spilled pages now (every limit is 0). */
        stock_spill_clear(c);
}

size_t stock_take_all(mb_client *c, void **out, size_t n) {
        size_t got = 0;
        unsigned first = pcpu_current_cpu(c->rseq_offset, c->ncpus);

        for (unsigned k = 0; k < c->ncpus && got < n; k++) {
                unsigned cpu = (first + k) % c->ncpus;
                struct stock *s;
                uint32_t take;

                /* A racy peek spares locking (a membarrier in rseq mode)
                 * an empty stock; pages that arrive meanwhile stay there. */
                if (stock_nr(&c->stocks[cpu]) == 0)
                        continue;
                s = stock_lock_cpu(c, cpu);
                take = (uint32_t) MB_MIN((size_t) stock_nr(s), n - got);
                if (take > 0)
                        stock_take_locked(c, s, out + got, take);
                stock_unlock(c, s);
                got += take;
        }
        if (got < n && stock_spill_count(c) > 0) {
                struct stock *s = stock_lock_this(c);

                got += stock_spill_take_locked(c, s, out + got, n - got);
                stock_unlock(c, s);
        }
        return got;
}

ptrdiff_t mb_client_cpu_offset(const mb_client *c) {
        return c->rseq_offset;
}

long mb_client_drain_stocks(mb_client *c) {
        size_t room = stock_room_all(c), got;
        _cleanup_(freep) void **buf = NULL;
        int r;

        if (c->forked || session_broken(c))
                return 0;
        buf = malloc(room * sizeof(void *));
        if (!buf)
                return -ENOMEM;
        got = stock_take_all(c, buf, room);
        r = session_uncharge(c, buf, got, MB__UNCHARGE_REASON__UNCHARGE_DRAIN, false, false, 0);
        return r < 0 ? r : (long) got;
}

void stock_account_unlock(const mb_client *c, struct stock *s, int64_t n) {
        stock_assert_locked(s);
        if (n > 0) {
                stock_slot_add(s->slot, MB_STAT_PAGES, n);
                stock_slot_add(s->slot, MB_STAT_PGALLOC, n);
        } else {
                stock_slot_add(s->slot, MB_STAT_PAGES, n);
                stock_slot_add(s->slot, MB_STAT_PGFREE, -n);
        }
        stock_slot_commit(c, s, (uint64_t) (n > 0 ? n : -n));
        stock_unlock(c, s);
}

/* Take up to @n pages from the stock of this CPU, refilled from the spill
 * first when it has too few (no trip to the daemon for pages another CPU
 * freed). */
static size_t stock_take_local(mb_client *c, void **out, size_t n) {
        struct stock *s = stock_lock_this(c);
        uint32_t take;

        if (stock_nr(s) < n)
                (void) stock_spill_refill_locked(c, s);
        take = (uint32_t) MB_MIN((size_t) stock_nr(s), n);
        if (take > 0)
                stock_take_locked(c, s, out, take);
        if (take < n && stock_spill_count(c) > 0)
                take += (uint32_t) stock_spill_take_locked(c, s, out + take, n - take);
        stock_unlock(c, s);
        return take;
}


/*
 * Give @n pages to this CPU's stock.  When the stock would pass its limit
 * (2 * charge_batch), whole batches go back to the daemon until it does not,
 * the coldest pages first (the bottom of the stock, then the oldest of
 * @pages): for one page that is the one Uncharge of charge_batch pages of
 * the stock protocol, as the kernel's refill_stock() drains an overfull stock.
 * @freed of the pages come from the application (counted as pgfree).
 * The Uncharge goes out without waiting for its Ack (the daemon handles a
 * connection's frames in order, so a later Charge finds them returned);
 * no lock needed: the batch is read once, the stock's limit under its lock.
 */
static int stock_put_locked(mb_client *c, void **pages, size_t n, size_t freed) {
        _cleanup_(freep) void **back = NULL;
        unsigned batch = __atomic_load_n(&c->charge_batch, __ATOMIC_RELAXED);
        size_t total, nback = 0, nr, kept;
        struct stock *s;

        if (n == 0)
                return 0;
        /* nr <= limit, so at most n rounded up to a batch goes back; no
         * allocation under the stock lock. */
        back = malloc((n + batch) * sizeof(void *));
        if (!back)
                return -ENOMEM;

        s = stock_lock_this(c);
        if (s->limit == 0) {
                /* The session broke while we were on our way: nothing to keep. */
                stock_unlock(c, s);
                return session_lost(c);
        }
        nr = stock_nr(s);
        total = nr + n;
        if (total > s->limit)
                nback = MB_MIN(DIV_ROUND_UP(total - s->limit, batch) * batch, total);
        if (nback <= nr) {
                memcpy(back, s->pages, nback * sizeof(void *));
                memmove(s->pages, s->pages + nback, (nr - nback) * sizeof(void *));
                memcpy(s->pages + nr - nback, pages, n * sizeof(void *));
        } else {
                size_t from_new = nback - nr;

                memcpy(back, s->pages, nr * sizeof(void *));
                memcpy(back + nr, pages, from_new * sizeof(void *));
                memcpy(s->pages, pages + from_new, (n - from_new) * sizeof(void *));
        }
        stock_set_nr(s, (uint32_t) (total - nback));
        stock_slot_add(s->slot, MB_STAT_STOCK, (int64_t) n - (int64_t) nback);
        if (freed > 0) {
                stock_slot_add(s->slot, MB_STAT_PAGES, -(int64_t) freed);
                stock_slot_add(s->slot, MB_STAT_PGFREE, (int64_t) freed);
        }
        /* Another CPU may be charging what this one returns: the spill
         * keeps a batch per CPU for it. */
        kept = stock_spill_put_locked(c, s, back, nback);
        stock_slot_commit(c, s, (n > nback ? n - nback : nback - n) + freed);
        stock_unlock(c, s);

        return session_uncharge(c, back + kept, nback - kept, MB__UNCHARGE_REASON__UNCHARGE_FREE, false, false, 0);
}

/*
 * Charge @n (<= MB_CHARGE_MAX_PAGES) pages for the application into @out.
 * Charges a whole batch when @n is smaller and stocks the rest; at a limit
 * the daemon charges exactly @n instead (Charge.need), as try_charge()
 * falls back from MEMCG_CHARGE_BATCH to nr_pages before counting `max`.
 * conn_lock held.
 */
static int stock_charge_batched_locked(mb_client *c, void **out, size_t n, unsigned flags) {
        _cleanup_(freep) void **buf = NULL;
        size_t want = MB_MAX(n, (size_t) c->charge_batch), got = 0;
        int r;

        mb_assert_mutex_held(&c->session.conn_lock);
        if (want == n)
                return session_charge_locked(c, (uint32_t) n, (uint32_t) n, out, &got, flags);
        buf = malloc(want * sizeof(void *));
        if (!buf)
                return -ENOMEM;
        r = session_charge_locked(c, (uint32_t) want, (uint32_t) n, buf, &got, flags);
        if (r < 0)
                return r;
        memcpy(out, buf, n * sizeof(void *));
        /* Without the library's thread nothing charges ahead and populates:
         * fault the batch in here, for less than its faults would cost. */
        if (!c->session.thread_started)
                stock_populate_pages(c, buf, got);
        /* The extra pages are ours whatever happens next. */
        if (got > n)
                (void) stock_put_locked(c, buf + n, got - n, 0);
        return 0;
}

/* stock_alloc_slow() under conn_lock, the session not broken. */
static int stock_alloc_locked(mb_client *c, void **out, size_t n, unsigned flags) {
        size_t got;
        int r = 0;

        mb_assert_mutex_held(&c->session.conn_lock);
        got = stock_take_local(c, out, n);
        while (got < n) {
                size_t chunk = MB_MIN(n - got, (size_t) MB_CHARGE_MAX_PAGES), k;

                r = stock_charge_batched_locked(c, out + got, chunk, flags);
                if (r == 0) {
                        got += chunk;
                        continue;
                }
                if (r != -ENOMEM)
                        break;
                k = stock_take_all(c, out + got, n - got);
                if (k == 0)
                        break;
                got += k;
                r = 0;
        }
        if (got < n) {
                char reason[MB_ERROR_MESSAGE_BYTES];

                /* All or nothing: what we took goes back, the reason stays. */
                snprintf(reason, sizeof(reason), "%s", mb_last_error());
                if (!session_broken(c))
                        (void) stock_put_locked(c, out, got, 0);
                mb_set_error("%s", reason);
                return r == 0 ? -ENOMEM : r;
        }
        stock_account_unlock(c, stock_lock_this(c), (int64_t) n);
        return 0;
}

/*
 * The slow path of every allocation: @n pages into @out, all or nothing.
 * Takes what this CPU's stock has (another thread may have refilled it),
 * charges the rest in batches, and at a limit takes the other CPUs' stocks
 * before failing (drain_all_stock() before the OOM path).
 */
static int stock_alloc_slow(mb_client *c, void **out, size_t n, unsigned flags) {
        int r;

        __atomic_add_fetch(&c->refill.misses, 1, __ATOMIC_RELAXED);
        if (c->forked)
                return session_lost(c);
        if (reclaim_running(c)) {
                /* conn_lock may be ours already (direct reclaim). */
                mb_set_error("a shrinker must not allocate broker pages beyond the stock");
                return -EDEADLK;
        }
        {
                MB_LOCK_GUARD(&c->session.conn_lock);
                r = session_broken(c) ? session_lost(c) : stock_alloc_locked(c, out, n, flags);
        }
        if (r == 0) {
                /* A charge on demand leaves less than a batch: ask ahead now. */
                unsigned cpu = pcpu_current_cpu(c->rseq_offset, c->ncpus);

                if (stock_refill_due(c, stock_nr(&c->stocks[cpu])))
                        stock_refill_kick(c, cpu);
        }
        session_dispatch_events(c);
        return r;
}

/* The slow path of free: the stock is full (or disabled). */
static int stock_free_slow(mb_client *c, void **pages, size_t n) {
        int r;

        if (c->forked)
                return session_lost(c);
        if (reclaim_running(c))
                /* A shrinker frees while this thread answers a Reclaim: the
                 * pages join the answer. */
                return reclaim_collect(c, pages, n);
        /* No conn_lock: a return never waits, not even for a charge in
         * flight. */
        r = session_broken(c) ? session_lost(c) : stock_put_locked(c, pages, n, n);
        session_dispatch_events(c);
        return r;
}

static __attribute__((noinline)) void *stock_page_alloc_slow(mb_client *c, unsigned flags) {
        void *p;
        int r;

        r = stock_alloc_slow(c, &p, 1, flags);
        if (r < 0) {
                errno = -r;
                return NULL;
        }
        return p;
}

static __attribute__((noinline)) int stock_page_free_slow(mb_client *c, void *page) {
        return stock_free_slow(c, &page, 1);
}

/* ---- the fast paths ---- */

/* The fast path of atomic mode, and of rseq mode after a failed sequence:
 * this CPU's stock under its lock, adding to the slot. */
static void stock_use_locked(const mb_client *c, struct stock *s, int64_t n) {
        if (stock_stat_use(s->slot, n))
                stock_stat_dirty(c);
}

static __attribute__((noinline)) void *stock_page_alloc_locked(mb_client *c) {
        struct stock *s = stock_lock_this(c);
        uint32_t nr = stock_nr(s);

        if (_likely_(nr > 0)) {
                void *p = s->pages[nr - 1];

                stock_set_nr(s, nr - 1);
                stock_use_locked(c, s, 1);
                stock_unlock(c, s);
                if (stock_refill_due(c, nr - 1))
                        stock_refill_kick(c, (unsigned) (s - c->stocks));
                return p;
        }
        stock_unlock(c, s);
        return stock_page_alloc_slow(c, 0);
}

static __attribute__((noinline)) int stock_page_free_locked(mb_client *c, void *page) {
        struct stock *s = stock_lock_this(c);
        uint32_t nr = stock_nr(s);

        if (_likely_(nr < s->limit)) {
                s->pages[nr] = page;
                stock_set_nr(s, nr + 1);
                stock_use_locked(c, s, -1);
                stock_unlock(c, s);
                return 0;
        }
        stock_unlock(c, s);
        return stock_page_free_slow(c, page);
}

#if PCPU_HAVE_RSEQ
/* A sequence aborted on CPU @cpu may have left values one operation ahead
 * in its slot (stock.h): an operation on that CPU overwrites them, and so
 * does taking its lock.  The caller now runs elsewhere: take and release
 * that stock's lock from here. */
static void stock_rseq_settle(const mb_client *c, unsigned cpu) {
        stock_unlock(c, stock_lock_cpu(c, cpu));
}

/*
 * After a sequence did not commit (@r, on CPU @cpu): try again while the
 * stock has pages or room, on the CPU the thread runs on now.  A sequence
 * the kernel aborted leaves its CPU's slot to settle: by a later commit on
 * that CPU (the retry's own: it writes the same slot items, absolute values
 * from the word it commits, so nothing is left to settle and no system call
 * is made, the common case of a thread preempted inside its sequence and
 * resumed on the same CPU), or stock_rseq_settle() once the thread runs
 * elsewhere.  One past STOCK_OPS_RESET operations settles at once (the
 * unlock starts them again).  An empty or full stock, or a thread without a
 * valid rseq CPU, takes the locked path (settling first).
 */
#define STOCK_RSEQ_RETRY(attempt)                                                       \
        int unsettled = -1;                                                             \
                                                                                        \
        for (;;) {                                                                      \
                if (r == STOCK_RSEQ_RESET)                                              \
                        stock_rseq_settle(c, cpu);                                      \
                else if (r == STOCK_RSEQ_SLOW)                                          \
                        break;                                                          \
                else if (r == STOCK_RSEQ_ABORTED)                                       \
                        unsettled = (int) cpu;                                          \
                cpu = pcpu_rseq_cpu(c->rseq_offset);                                    \
                if (unsettled >= 0 && (unsigned) unsettled != cpu) {                    \
                        stock_rseq_settle(c, (unsigned) unsettled);                     \
                        unsettled = -1;                                                 \
                }                                                                       \
                if (cpu >= c->ncpus)                                                    \
                        break;                                                          \
                r = attempt;                                                            \
                if (r == STOCK_RSEQ_DONE) {                                             \
                        /* Its commit rewrote the slot of @cpu. */                      \
                        unsettled = -1;                                                 \
                        break;                                                          \
                }                                                                       \
        }                                                                               \
        if (unsettled >= 0)                                                             \
                stock_rseq_settle(c, (unsigned) unsettled)

static __attribute__((noinline)) void *stock_page_alloc_retry(mb_client *c, int r, uint32_t cpu) {
        void *p = NULL;

        STOCK_RSEQ_RETRY(stock_rseq_pop(c, cpu, &p));
        if (r == STOCK_RSEQ_DONE)
                return p;
        return stock_page_alloc_locked(c);
}

static __attribute__((noinline)) int stock_page_free_retry(mb_client *c, void *page, int r, uint32_t cpu) {
        STOCK_RSEQ_RETRY(stock_rseq_push(c, cpu, page));
        if (r == STOCK_RSEQ_DONE)
                return 0;
        return stock_page_free_locked(c, page);
}
#endif

/* The rseq CPU of the caller for the fast paths: read from the struct
 * rseq glibc keeps in every thread's control block (registered or not);
 * beyond c->rseq_ncpus (0 in atomic mode) when no sequence may run. */
static inline uint32_t stock_fast_cpu(const mb_client *c) {
        return pcpu_rseq_cpu(c->rseq_area + (ptrdiff_t) offsetof(struct rseq, cpu_id));
}

void *mb_page_alloc(mb_client *c) {
#if PCPU_HAVE_RSEQ
        uint32_t cpu = stock_fast_cpu(c);

        if (_likely_(cpu < c->rseq_ncpus)) {
                void *p;
                int r = stock_rseq_pop(c, cpu, &p);

                if (_likely_(r == STOCK_RSEQ_DONE)) {
                        if (stock_refill_due(c, stock_nr(&c->stocks[cpu])))
                                stock_refill_kick(c, cpu);
                        return p;
                }
                return stock_page_alloc_retry(c, r, cpu);
        }
        if (c->rseq_lock)
                return stock_page_alloc_retry(c, STOCK_RSEQ_SLOW, cpu);
#endif
        return stock_page_alloc_locked(c);
}

int mb_page_alloc_bulk(mb_client *c, void **pages, size_t n) {
        struct stock *s;
        uint32_t nr;

        if (n == 0)
                return 0;
        if (!pages) {
                mb_set_error("mb_page_alloc_bulk: no array");
                return -EINVAL;
        }
        s = stock_lock_this(c);
        nr = stock_nr(s);
        if (_likely_(nr >= n)) {
                nr -= (uint32_t) n;
                stock_set_nr(s, nr);
                memcpy(pages, s->pages + nr, n * sizeof(void *));
                stock_use_locked(c, s, (int64_t) n);
                stock_unlock(c, s);
                if (stock_refill_due(c, nr))
                        stock_refill_kick(c, (unsigned) (s - c->stocks));
                return 0;
        }
        stock_unlock(c, s);
        return stock_alloc_slow(c, pages, n, 0);
}

/* MB_ALLOC_NOWAIT (GFP_NOWAIT): no trip to the daemon; a lost session says
 * so, an empty stock is EAGAIN. */
static int stock_nowait_fail(mb_client *c, const char *what) {
        if (c->forked || session_broken(c))
                return session_lost(c);
        mb_set_error("%s: the stock cannot serve it (MB_ALLOC_NOWAIT)", what);
        return -EAGAIN;
}

void *mb_page_alloc_flags(mb_client *c, unsigned flags) {
        struct stock *s;
        uint32_t nr;

        if (flags & ~(MB_ALLOC_NOWAIT | MB_ALLOC_NORETRY)) {
                mb_set_error("mb_page_alloc_flags: unknown flags 0x%x", flags);
                errno = EINVAL;
                return NULL;
        }
        if (flags == 0)
                return mb_page_alloc(c);
        s = stock_lock_this(c);
        nr = stock_nr(s);
        if (nr > 0) {
                void *p = s->pages[nr - 1];

                stock_set_nr(s, nr - 1);
                stock_use_locked(c, s, 1);
                stock_unlock(c, s);
                return p;
        }
        stock_unlock(c, s);
        if (flags & MB_ALLOC_NOWAIT) {
                errno = -stock_nowait_fail(c, "mb_page_alloc_flags");
                return NULL;
        }
        return stock_page_alloc_slow(c, flags);
}

int mb_page_alloc_bulk_flags(mb_client *c, void **pages, size_t n, unsigned flags) {
        struct stock *s;
        uint32_t nr;

        if (flags & ~(MB_ALLOC_NOWAIT | MB_ALLOC_NORETRY)) {
                mb_set_error("mb_page_alloc_bulk_flags: unknown flags 0x%x", flags);
                return -EINVAL;
        }
        if (flags == 0)
                return mb_page_alloc_bulk(c, pages, n);
        if (n == 0)
                return 0;
        if (!pages) {
                mb_set_error("mb_page_alloc_bulk_flags: no array");
                return -EINVAL;
        }
        s = stock_lock_this(c);
        nr = stock_nr(s);
        if (nr >= n) {
                nr -= (uint32_t) n;
                stock_set_nr(s, nr);
                memcpy(pages, s->pages + nr, n * sizeof(void *));
                stock_use_locked(c, s, (int64_t) n);
                stock_unlock(c, s);
                return 0;
        }
        stock_unlock(c, s);
        if (flags & MB_ALLOC_NOWAIT)
                return stock_nowait_fail(c, "mb_page_alloc_bulk_flags");
        return stock_alloc_slow(c, pages, n, flags);
}

static int stock_bad_page(const mb_client *c, const void *page) {
        mb_set_error("%p is not a page of the arena of tenant %s", page, c->tenant);
        return -EINVAL;
}

int mb_page_free(mb_client *c, void *page) {
        if (_unlikely_(!client_page_valid(c, page)))
                return stock_bad_page(c, page);
#if PCPU_HAVE_RSEQ
        {
                uint32_t cpu = stock_fast_cpu(c);

                if (_likely_(cpu < c->rseq_ncpus)) {
                        int r = stock_rseq_push(c, cpu, page);

                        if (_likely_(r == STOCK_RSEQ_DONE))
                                return 0;
                        return stock_page_free_retry(c, page, r, cpu);
                }
                if (c->rseq_lock)
                        return stock_page_free_retry(c, page, STOCK_RSEQ_SLOW, cpu);
        }
#endif
        return stock_page_free_locked(c, page);
}

int mb_page_free_bulk(mb_client *c, void **pages, size_t n) {
        struct stock *s;
        size_t push;
        uint32_t nr;

        if (n == 0)
                return 0;
        if (!pages) {
                mb_set_error("mb_page_free_bulk: no array");
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (!client_page_valid(c, pages[i]))
                        return stock_bad_page(c, pages[i]);

        s = stock_lock_this(c);
        nr = stock_nr(s);
        push = MB_MIN(n, (size_t) (nr < s->limit ? s->limit - nr : 0));
        if (push > 0) {
                memcpy(s->pages + nr, pages, push * sizeof(void *));
                stock_set_nr(s, nr + (uint32_t) push);
                stock_use_locked(c, s, -(int64_t) push);
        }
        stock_unlock(c, s);
        if (_likely_(push == n))
                return 0;
        return stock_free_slow(c, pages + push, n - push);
}


int stock_setup(mb_client *c) {
        size_t cap = 2u * (size_t) c->batch_cap + 1u;
        /* Each CPU's page array starts on a cache line of its own. */
        size_t stride = DIV_ROUND_UP(cap * sizeof(void *), MB_CACHELINE_BYTES) * MB_CACHELINE_BYTES;

        c->stocks = aligned_alloc(MB_CACHELINE_BYTES, c->ncpus * sizeof(struct stock));
        c->stock_pages = aligned_alloc(MB_CACHELINE_BYTES, c->ncpus * stride);
        if (!c->stocks || !c->stock_pages)
                return -ENOMEM;
        for (unsigned i = 0; i < c->ncpus; i++)
                c->stocks[i] = (struct stock) {
                        .limit = 2u * c->charge_batch,
                        .cap = (uint32_t) cap,
                        .pages = (void **) ((uint8_t *) c->stock_pages + i * stride),
                        .slot = &c->stats->slot[i],
                };
        c->rseq_lock = stock_rseq_mode();
        c->rseq_ncpus = c->rseq_lock ? c->ncpus : 0;
        /* The bases of rseq mode: the slot as the daemon handed it. */
        for (unsigned i = 0; i < c->ncpus; i++)
                stock_rebase(&c->stocks[i], 0, 0);
        stock_refill_setup(c);
        return stock_spill_setup(c);
}

/* mb_internal.h: a stat slot written under the stock lock of its CPU. */
void mb_client_stat_add(mb_client *c, enum mb_stat_item item, int64_t delta) {
        struct stock *s;

        if (c->forked || (unsigned) item >= _MB_STAT_NR)
                return; /* the region is the parent's */
        s = stock_lock_this(c);
        mb_stat_slot_add(s->slot, item, delta);
        stock_stat_dirty(c);
        stock_unlock(c, s);
}
