/* SPDX-License-Identifier: MIT */
/*
 * mailbox.h - the one way to hand work to another thread's event loop.
 *
 * A mailbox is a queue of fixed-size messages owned by the thread that runs
 * one libevent base (the receiver).  Any thread posts: the message is copied
 * into the queue under a mutex and the mailbox's event is made active in the
 * receiving base (event_active() wakes that loop through libevent's own
 * notification fd, which evthread_use_pthreads() sets up).  The receiver's
 * loop then takes the whole queue under the lock at once and calls the
 * handler for each message, in order, without the lock: a handler may post
 * to any mailbox, this one included (those messages come in the next
 * drain).  A message that carries pointers is moved: the handler owns it,
 * and the dispose callback releases what is never handled (the mailbox
 * closed first).  For a pointer message use msg_size = sizeof(void *).
 *
 * Like Redis's ae.c or a kernel llist + irq_work: small, no policy.  The
 * producer never waits for the receiver (only for the queue's mutex).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct mailbox;

/* Called on the receiving thread for each message; @msg is the mailbox's
 * copy, valid during the call.  The handler owns what it points to. */
typedef void (*mailbox_handler_t)(void *userdata, void *msg);
/* Releases what a message never handled owns (may be NULL: nothing to
 * release).  Called by mailbox_close() and by a post that fails. */
typedef void (*mailbox_dispose_t)(void *userdata, void *msg);

/**
 * mailbox_new - a mailbox delivering to @base (the receiver's base, which
 * must outlive it or be closed after mailbox_close()) messages of
 * @msg_size bytes.  @handle is required, @dispose optional; @userdata is
 * passed to both.  Returns 0 or -ENOMEM / -EINVAL (msg_size 0).
 */
int mailbox_new(struct event_base *base, size_t msg_size, mailbox_handler_t handle, mailbox_dispose_t dispose,
                void *userdata, struct mailbox **ret);

/**
 * mailbox_post - copy @msg into @box and wake the receiver.  Any thread.
 * Returns 0 (the message now belongs to the mailbox), -ENOMEM or
 * -ESHUTDOWN (closed); on error the message was disposed (the dispose
 * callback ran on it), so the caller never keeps a half-owned message.
 */
int mailbox_post(struct mailbox *box, const void *msg);

/**
 * mailbox_close - stop deliveries: what is queued is disposed, later posts
 * fail with -ESHUTDOWN, and the event is freed.  Call it on the receiving
 * thread, or once that thread has stopped, and before the base is freed.
 * Idempotent; NULL is a no-op.
 */
void mailbox_close(struct mailbox *box);

/* Close (if not yet) and free; NULL is a no-op. */
void mailbox_free(struct mailbox *box);

/* Messages queued and not yet taken by the receiver (for tests, logs). */
size_t mailbox_pending(struct mailbox *box);
