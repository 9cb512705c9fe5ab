/* SPDX-License-Identifier: MIT */
/*
 * macros.h - the few helpers every module shares: cleanup attributes in the
 * systemd style (_cleanup_(), TAKE_PTR), cache-line alignment, and small
 * arithmetic helpers.  No dependencies beyond the C library.
 */
#pragma once

#include <errno.h>
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
