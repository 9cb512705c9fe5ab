/* SPDX-License-Identifier: MIT */
/*
 * macros.h - the few helpers every module shares: cleanup attributes in the
 * systemd style (_cleanup_(), TAKE_PTR), cache-line alignment, and small
 * arithmetic helpers.  No dependencies beyond the C library.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _packed_ __attribute__((packed))

#define MB_CACHELINE_BYTES 64
#define _cacheline_aligned_ __attribute__((aligned(MB_CACHELINE_BYTES)))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MB_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MB_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))

/* Take ownership of a pointer out of a _cleanup_ variable. */
#define TAKE_PTR(p)                          \
        ({                                   \
                __typeof__(p) _ptr_ = (p);   \
                (p) = NULL;                  \
                _ptr_;                       \
        })

#define TAKE_FD(fd)                          \
        ({                                   \
                int _fd_ = (fd);             \
                (fd) = -1;                   \
                _fd_;                        \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}

static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

/* Define NAMEp() that calls NAME(*p) when *p is not NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)          \
        static inline void func##p(type *p) {            \
                if (*p)                                  \
                        func(*p);                        \
        }

/* Negative errno helpers. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

/* Intrusive doubly linked lists of structs with `prev` and `next` members,
 * headed by a plain pointer (systemd's LIST_PREPEND/LIST_REMOVE). */
#define MB_LIST_PREPEND(head, item)                      \
        do {                                             \
                (item)->prev = NULL;                     \
                (item)->next = (head);                   \
                if (head)                                \
                        (head)->prev = (item);           \
                (head) = (item);                         \
        } while (0)

#define MB_LIST_REMOVE(head, item)                       \
        do {                                             \
                if ((item)->prev)                        \
                        (item)->prev->next = (item)->next; \
                else                                     \
                        (head) = (item)->next;           \
                if ((item)->next)                        \
                        (item)->next->prev = (item)->prev; \
                (item)->prev = (item)->next = NULL;      \
        } while (0)

/* ---- scope-bound locks ----
 *
 * MB_LOCK_GUARD(m) locks the pthread mutex @m until the end of the
 * enclosing scope (the kernel's guard(mutex), systemd's cleanup-based
 * unlocking): no unlock on each return path.  MB_RDLOCK_GUARD and
 * MB_WRLOCK_GUARD do the same for a pthread rwlock. */
#include <pthread.h>

static inline pthread_mutex_t *mb_mutex_lock_guard(pthread_mutex_t *m) {
        pthread_mutex_lock(m);
        return m;
}

static inline void mb_mutex_unlockp(pthread_mutex_t **m) {
        if (*m)
                pthread_mutex_unlock(*m);
}

static inline pthread_rwlock_t *mb_rwlock_rdlock_guard(pthread_rwlock_t *l) {
        pthread_rwlock_rdlock(l);
        return l;
}

static inline pthread_rwlock_t *mb_rwlock_wrlock_guard(pthread_rwlock_t *l) {
        pthread_rwlock_wrlock(l);
        return l;
}

static inline void mb_rwlock_unlockp(pthread_rwlock_t **l) {
        if (*l)
                pthread_rwlock_unlock(*l);
}

#define MB_CONCAT_(a, b) a##b
#define MB_CONCAT(a, b) MB_CONCAT_(a, b)
#define MB_UNIQUE(prefix) MB_CONCAT(prefix, __COUNTER__)

#define MB_LOCK_GUARD(m) \
        _cleanup_(mb_mutex_unlockp) _unused_ pthread_mutex_t *MB_UNIQUE(_guard_) = mb_mutex_lock_guard(m)
#define MB_RDLOCK_GUARD(l) \
        _cleanup_(mb_rwlock_unlockp) _unused_ pthread_rwlock_t *MB_UNIQUE(_guard_) = mb_rwlock_rdlock_guard(l)
#define MB_WRLOCK_GUARD(l) \
        _cleanup_(mb_rwlock_unlockp) _unused_ pthread_rwlock_t *MB_UNIQUE(_guard_) = mb_rwlock_wrlock_guard(l)

/* ---- debug-build assertions of locking and threading rules ----
 *
 * mb_assert_debug(expr) aborts with the file, line and function when @expr
 * is false, in debug builds only (MB_DEBUG defined, or the sanitizer build);
 * elsewhere it compiles to nothing and does not evaluate @expr, so that a
 * fast path keeps its instructions (the kernel's lockdep_assert_held(),
 * systemd's assert()). */
#if defined(MB_DEBUG) || defined(MB_SANITIZERS)
#define MB_DEBUG_ASSERTS 1
#include <sys/types.h>

static inline __attribute__((noreturn, cold)) void mb_assert_failed(const char *expr, const char *file, int line,
                                                                      const char *func) {
        fprintf(stderr, "%s:%d: %s: debug assertion failed: %s\n", file, line, func, expr);
        abort();
}

#define mb_assert_debug(expr)                                                 \
        do {                                                                  \
                if (!(expr))                                                  \
                        mb_assert_failed(#expr, __FILE__, __LINE__, __func__); \
        } while (0)

/* Whether the calling thread owns @m.  glibc records the owner's tid in
 * every mutex it locks (also the plain kind), and a condition wait puts it
 * back on wake-up. */
static inline bool mb_mutex_held(const pthread_mutex_t *m) {
#ifdef __GLIBC__
        return m->__data.__owner == gettid();
#else
        (void) m;
        return true;
#endif
}

/* lockdep_assert_held() / lockdep_assert_not_held() for a pthread mutex. */
#define mb_assert_mutex_held(m) mb_assert_debug(mb_mutex_held(m))
#define mb_assert_mutex_not_held(m) mb_assert_debug(!mb_mutex_held(m))
#else
#define MB_DEBUG_ASSERTS 0
#define mb_assert_debug(expr) ((void) sizeof(!(expr)))
#define mb_assert_mutex_held(m) ((void) sizeof(m))
#define mb_assert_mutex_not_held(m) ((void) sizeof(m))
#endif
