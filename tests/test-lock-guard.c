/* SPDX-License-Identifier: MIT */
/*
 * test-lock-guard.c - the scope-bound locks and the debug-build lock
 * assertions of common/macros.h, which the client library's modules use
 * in place of hand-written unlocks and of "lock held" comments.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macros.h"

static pthread_mutex_t test_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t test_rwlock = PTHREAD_RWLOCK_INITIALIZER;

static bool mutex_is_free(pthread_mutex_t *m) {
        if (pthread_mutex_trylock(m) != 0)
                return false;
        pthread_mutex_unlock(m);
        return true;
}

/* Returns early from inside the guarded scope, with the lock held. */
static int early_return(bool leave) {
        MB_LOCK_GUARD(&test_lock);

        if (leave)
                return mutex_is_free(&test_lock) ? -1 : 1;
        return 0;
}

START_TEST(test_guard_unlocks_at_scope_end) {
        {
                MB_LOCK_GUARD(&test_lock);
                ck_assert(!mutex_is_free(&test_lock));
        }
        ck_assert(mutex_is_free(&test_lock));
}
END_TEST

START_TEST(test_guard_unlocks_on_return) {
        ck_assert_int_eq(early_return(true), 1);
        ck_assert(mutex_is_free(&test_lock));
        ck_assert_int_eq(early_return(false), 0);
        ck_assert(mutex_is_free(&test_lock));
}
END_TEST

START_TEST(test_two_guards_in_one_scope) {
        static pthread_mutex_t second = PTHREAD_MUTEX_INITIALIZER;

        {
                MB_LOCK_GUARD(&test_lock);
                MB_LOCK_GUARD(&second);
                ck_assert(!mutex_is_free(&test_lock));
                ck_assert(!mutex_is_free(&second));
        }
        ck_assert(mutex_is_free(&test_lock));
        ck_assert(mutex_is_free(&second));
}
END_TEST

START_TEST(test_rwlock_guards) {
        {
                MB_RDLOCK_GUARD(&test_rwlock);
                ck_assert_int_ne(pthread_rwlock_trywrlock(&test_rwlock), 0);
        }
        {
                MB_WRLOCK_GUARD(&test_rwlock);
                ck_assert_int_ne(pthread_rwlock_tryrdlock(&test_rwlock), 0);
        }
        ck_assert_int_eq(pthread_rwlock_trywrlock(&test_rwlock), 0);
        pthread_rwlock_unlock(&test_rwlock);
}
END_TEST

/* Run @fn in a child; its termination status. */
static int in_child(void (*fn)(void)) {
        int status;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                fn();
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return status;
}

static void assert_held_without_lock(void) {
        mb_assert_mutex_held(&test_lock);
}

static void assert_held_with_lock(void) {
        MB_LOCK_GUARD(&test_lock);
        mb_assert_mutex_held(&test_lock);
}

static void assert_not_held_with_lock(void) {
        MB_LOCK_GUARD(&test_lock);
        mb_assert_mutex_not_held(&test_lock);
}

/* In a debug build (MB_DEBUG, or the sanitizer build) a broken lock rule
 * aborts; elsewhere the assertion is compiled out and does nothing. */
START_TEST(test_lock_assertions) {
        int st = in_child(assert_held_with_lock);

        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        st = in_child(assert_held_without_lock);
        if (MB_DEBUG_ASSERTS)
                ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
        else
                ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        st = in_child(assert_not_held_with_lock);
        if (MB_DEBUG_ASSERTS)
                ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
        else
                ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("lock-guard");
        TCase *tc = tcase_create("guards");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_guard_unlocks_at_scope_end);
        tcase_add_test(tc, test_guard_unlocks_on_return);
        tcase_add_test(tc, test_two_guards_in_one_scope);
        tcase_add_test(tc, test_rwlock_guards);
        tcase_add_test(tc, test_lock_assertions);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_set_fork_status(sr, CK_NOFORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
