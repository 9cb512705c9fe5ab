/* SPDX-License-Identifier: MIT */
/*
 * test-mailbox.c - daemon/base/mailbox.c, linked from the daemon's convenience
 * library: messages really cross threads (producers post while a receiver
 * thread runs its own event base), in order, on the receiver's thread;
 * handlers may post; closing disposes of what was never handled.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "mailbox.h"

#define PRODUCERS 4
#define MESSAGES_PER_PRODUCER 20000u
#define TEST_TIMEOUT_SEC 60

struct seq_msg {
        unsigned producer;
        unsigned seq;
};

/* The receiver: a thread running its own base until told to stop. */
struct receiver {
        struct event_base *base;
        pthread_t thread;
        pthread_t self; /* set by the receiver thread itself */
        struct mailbox *box;

        /* Receiver thread only, read after the join. */
        unsigned next[PRODUCERS];
        unsigned received;
        unsigned out_of_order;
        unsigned wrong_thread;
        unsigned expected;
};

static void *receiver_main(void *userdata) {
        struct receiver *rx = userdata;

        rx->self = pthread_self();
        event_base_loop(rx->base, EVLOOP_NO_EXIT_ON_EMPTY);
        return NULL;
}

static void seq_handle(void *userdata, void *p) {
        struct receiver *rx = userdata;
        struct seq_msg *msg = p;

        if (!pthread_equal(pthread_self(), rx->self))
                rx->wrong_thread++;
        if (msg->seq != rx->next[msg->producer])
                rx->out_of_order++;
        rx->next[msg->producer] = msg->seq + 1;
        if (++rx->received == rx->expected)
                event_base_loopbreak(rx->base);
}

static void receiver_start(struct receiver *rx, size_t msg_size, mailbox_handler_t handle,
                           mailbox_dispose_t dispose) {
        rx->base = event_base_new();
        ck_assert_ptr_nonnull(rx->base);
        ck_assert_int_eq(mailbox_new(rx->base, msg_size, handle, dispose, rx, &rx->box), 0);
        ck_assert_int_eq(pthread_create(&rx->thread, NULL, receiver_main, rx), 0);
}

static void receiver_join(struct receiver *rx) {
        ck_assert_int_eq(pthread_join(rx->thread, NULL), 0);
        mailbox_free(rx->box);
        event_base_free(rx->base);
}

struct producer {
        struct receiver *rx;
        unsigned index;
        unsigned failed;
};

static void *producer_main(void *userdata) {
        struct producer *pr = userdata;

        for (unsigned i = 0; i < MESSAGES_PER_PRODUCER; i++) {
                struct seq_msg msg = { .producer = pr->index, .seq = i };

                if (mailbox_post(pr->rx->box, &msg) < 0)
                        pr->failed++;
        }
        return NULL;
}

START_TEST(test_crosses_threads_in_order) {
        struct receiver rx = { .expected = PRODUCERS * MESSAGES_PER_PRODUCER };
        struct producer pr[PRODUCERS];
        pthread_t threads[PRODUCERS];

        receiver_start(&rx, sizeof(struct seq_msg), seq_handle, NULL);
        for (unsigned i = 0; i < PRODUCERS; i++) {
                pr[i] = (struct producer) { .rx = &rx, .index = i };
                ck_assert_int_eq(pthread_create(&threads[i], NULL, producer_main, &pr[i]), 0);
        }
        for (unsigned i = 0; i < PRODUCERS; i++) {
                ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
                ck_assert_uint_eq(pr[i].failed, 0);
        }
        /* The receiver leaves its loop once it has every message. */
        receiver_join(&rx);
        ck_assert_uint_eq(rx.received, PRODUCERS * MESSAGES_PER_PRODUCER);
        ck_assert_uint_eq(rx.out_of_order, 0);
        ck_assert_uint_eq(rx.wrong_thread, 0);
        for (unsigned i = 0; i < PRODUCERS; i++)
                ck_assert_uint_eq(rx.next[i], MESSAGES_PER_PRODUCER);
}
END_TEST

/* A handler that posts to its own mailbox until a count is reached. */
static void chain_handle(void *userdata, void *p) {
        struct receiver *rx = userdata;
        struct seq_msg *msg = p;

        if (!pthread_equal(pthread_self(), rx->self))
                rx->wrong_thread++;
        rx->received++;
        if (msg->seq + 1 < rx->expected) {
                struct seq_msg next = { .seq = msg->seq + 1 };

                if (mailbox_post(rx->box, &next) < 0)
                        rx->out_of_order++;
                return;
        }
        event_base_loopbreak(rx->base);
}

START_TEST(test_handler_may_post) {
        struct receiver rx = { .expected = 100 };
        struct seq_msg first = { .seq = 0 };

        receiver_start(&rx, sizeof(struct seq_msg), chain_handle, NULL);
        ck_assert_int_eq(mailbox_post(rx.box, &first), 0);
        receiver_join(&rx);
        ck_assert_uint_eq(rx.received, 100);
        ck_assert_uint_eq(rx.out_of_order, 0);
        ck_assert_uint_eq(rx.wrong_thread, 0);
}
END_TEST

/* Pointer messages: the handler owns (and frees) what arrives; dispose
 * frees what never does. */
static _Atomic unsigned freed_by_dispose;

static void ptr_handle(void *userdata, void *p) {
        struct receiver *rx = userdata;
        unsigned *value = *(unsigned **) p;

        if (*value != rx->received)
                rx->out_of_order++;
        free(value);
        if (++rx->received == rx->expected)
                event_base_loopbreak(rx->base);
}

static unsigned disposed(void) {
        return atomic_load(&freed_by_dispose);
}

static void ptr_dispose(void *userdata, void *p) {
        free(*(unsigned **) p);
        atomic_fetch_add(&freed_by_dispose, 1);
}

START_TEST(test_pointer_messages_are_moved) {
        struct receiver rx = { .expected = 1000 };

        atomic_store(&freed_by_dispose, 0);
        receiver_start(&rx, sizeof(unsigned *), ptr_handle, ptr_dispose);
        for (unsigned i = 0; i < rx.expected; i++) {
                unsigned *value = malloc(sizeof(*value));

                ck_assert_ptr_nonnull(value);
                *value = i;
                ck_assert_int_eq(mailbox_post(rx.box, &value), 0);
        }
        receiver_join(&rx); /* leak-checked under the sanitizers */
        ck_assert_uint_eq(rx.received, 1000);
        ck_assert_uint_eq(rx.out_of_order, 0);
        ck_assert_uint_eq(disposed(), 0);
}
END_TEST

START_TEST(test_close_disposes_and_refuses) {
        struct event_base *base = event_base_new();
        struct mailbox *box = NULL;
        struct receiver rx = {};

        atomic_store(&freed_by_dispose, 0);
        ck_assert_ptr_nonnull(base);
        ck_assert_int_eq(mailbox_new(base, sizeof(unsigned *), ptr_handle, ptr_dispose, &rx, &box), 0);
        for (unsigned i = 0; i < 5; i++) {
                unsigned *value = malloc(sizeof(*value));

                ck_assert_ptr_nonnull(value);
                *value = i;
                ck_assert_int_eq(mailbox_post(box, &value), 0);
        }
        ck_assert_uint_eq(mailbox_pending(box), 5);

        /* Never delivered (the loop never ran): disposed at close. */
        mailbox_close(box);
        ck_assert_uint_eq(disposed(), 5);
        ck_assert_uint_eq(mailbox_pending(box), 0);

        /* A post after the close fails and the message is disposed. */
        {
                unsigned *value = malloc(sizeof(*value));

                ck_assert_ptr_nonnull(value);
                ck_assert_int_eq(mailbox_post(box, &value), -ESHUTDOWN);
        }
        ck_assert_uint_eq(disposed(), 6);
        mailbox_close(box); /* idempotent */
        mailbox_free(box);
        event_base_free(base);
        ck_assert_uint_eq(rx.received, 0);
}
END_TEST

START_TEST(test_bad_arguments) {
        struct event_base *base = event_base_new();
        struct mailbox *box = NULL;

        ck_assert_int_eq(mailbox_new(base, 0, ptr_handle, NULL, NULL, &box), -EINVAL);
        ck_assert_int_eq(mailbox_new(base, 8, NULL, NULL, NULL, &box), -EINVAL);
        ck_assert_ptr_null(box);
        mailbox_free(NULL);
        mailbox_close(NULL);
        event_base_free(base);
}
END_TEST

static Suite *mailbox_suite(void) {
        Suite *s = suite_create("mailbox");
        TCase *tc = tcase_create("threads");

        tcase_set_timeout(tc, TEST_TIMEOUT_SEC);
        tcase_add_test(tc, test_crosses_threads_in_order);
        tcase_add_test(tc, test_handler_may_post);
        tcase_add_test(tc, test_pointer_messages_are_moved);
        tcase_add_test(tc, test_close_disposes_and_refuses);
        tcase_add_test(tc, test_bad_arguments);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr;
        int failed;

        /* As membrokerd does: event_active() from other threads wakes the
         * base. */
        if (evthread_use_pthreads() < 0)
                return EXIT_FAILURE;
        sr = srunner_create(mailbox_suite());
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
