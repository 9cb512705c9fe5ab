/* SPDX-License-Identifier: MIT */
/*
 * slab_debug.c - debug mode of the slab caches (slab.h, "Debug mode"): red
 * zones, poison, state tags and the reports of bad frees, like SLUB_DEBUG.
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"
#include "slab/slab.h"

void slab_debug_report(mb_cache *s, const char *fmt, ...) {
        char buf[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        fprintf(stderr, "membroker slab: cache \"%s\": %s\n", s->name, buf);
        fflush(stderr);
        __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
}

void slab_debug_init_object(mb_cache *s, char *obj) {
        char *slot = obj - s->obj_offset;

        memset(slot, SLAB_RED_INACTIVE, s->obj_offset);
        memset(obj + s->object_size, SLAB_RED_INACTIVE, s->fp_offset - s->object_size);
        if (s->poison) {
                memset(obj, SLAB_POISON_FREE, s->object_size - 1);
                obj[s->object_size - 1] = (char) SLAB_POISON_END;
        }
        __atomic_store_n(slab_tag(s, obj), SLAB_TAG_FREE, __ATOMIC_RELAXED);
}


/* ---- debug checks (only with s->debug) ---- */

static bool slab_debug_check_bytes(mb_cache *s, void *obj, const char *what, char *from, size_t len, uint8_t want) {
        for (size_t i = 0; i < len; i++)
                if ((uint8_t) from[i] != want) {
                        slab_debug_report(s, "%s of object %p overwritten at %p (object%+td): 0x%02x, expected 0x%02x",
                                    what, obj, (void *) (from + i), (from + i) - (char *) obj,
                                    (unsigned) (uint8_t) from[i], (unsigned) want);
                        memset(from, want, len);
                        return false;
                }
        return true;
}

static void slab_debug_check_redzones(mb_cache *s, char *obj, uint8_t want) {
        slab_debug_check_bytes(s, obj, "red zone", obj - s->obj_offset, s->obj_offset, want);
        slab_debug_check_bytes(s, obj, "red zone", obj + s->object_size, s->fp_offset - s->object_size, want);
}

void slab_debug_alloc(mb_cache *s, char *obj) {
        uint64_t tag = __atomic_load_n(slab_tag(s, obj), __ATOMIC_RELAXED);

        if (tag != SLAB_TAG_FREE)
                slab_debug_report(s, "object %p on the free list is not marked free (tag 0x%016llx): free list corrupted",
                            (void *) obj, (unsigned long long) tag);
        if (s->poison) {
                for (size_t i = 0; i < s->object_size; i++) {
                        uint8_t want = i + 1 == s->object_size ? SLAB_POISON_END : SLAB_POISON_FREE;

                        if ((uint8_t) obj[i] != want) {
                                slab_debug_report(s, "use after free: object %p was written after it was freed "
                                            "(offset %zu: 0x%02x, expected 0x%02x)",
                                            (void *) obj, i, (unsigned) (uint8_t) obj[i], (unsigned) want);
                                break;
                        }
                }
        }
        slab_debug_check_redzones(s, obj, SLAB_RED_INACTIVE);
        memset(obj - s->obj_offset, SLAB_RED_ACTIVE, s->obj_offset);
        memset(obj + s->object_size, SLAB_RED_ACTIVE, s->fp_offset - s->object_size);
        __atomic_store_n(slab_tag(s, obj), SLAB_TAG_ALLOC, __ATOMIC_RELAXED);
}

/* Name the cache that owns @ptr, if any (for the wrong-cache report). */
static mb_cache *slab_debug_find_owner(mb_cache *s, const void *ptr) {
        struct slab_ctx *ctx = s->ctx;
        mb_cache *owner = NULL;

        pthread_mutex_lock(&ctx->lock);
        for (struct slab_list_node *n = ctx->caches.next; n != &ctx->caches && !owner; n = n->next) {
                mb_cache *o = slab_container_of(n, mb_cache, ctx_node);

                if (o == s)
                        continue;
                pthread_mutex_lock(&o->lock);
                if (slab_page_lookup(o, ptr))
                        owner = o;
                pthread_mutex_unlock(&o->lock);
        }
        pthread_mutex_unlock(&ctx->lock);
        return owner;
}

bool slab_debug_free(mb_cache *s, char *obj) {
        struct mb_slab *slab;
        size_t off = 0;
        uint64_t tag = SLAB_TAG_ALLOC;
        bool ok = false;

        pthread_mutex_lock(&s->lock);
        slab = slab_page_lookup(s, obj);
        if (slab) {
                off = (size_t) (obj - slab->page);
                /* Under the cache lock the slab cannot go away; the
                 * exchange makes two racing frees of one object find out
                 * about each other. */
                if (off >= s->obj_offset && (off - s->obj_offset) % s->object_bytes == 0 &&
                    (off - s->obj_offset) / s->object_bytes < s->objects)
                        ok = __atomic_compare_exchange_n(slab_tag(s, obj), &tag, SLAB_TAG_FREE, false,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&s->lock);

        if (!slab) {
                mb_cache *owner = slab_debug_find_owner(s, obj);

                if (owner)
                        slab_debug_report(s, "free of %p into the wrong cache: it belongs to cache \"%s\"; ignored",
                                    (void *) obj, owner->name);
                else
                        slab_debug_report(s, "free of %p: not an object of any slab cache; ignored", (void *) obj);
                return false;
        }
        if (!ok) {
                if (tag == SLAB_TAG_ALLOC)
                        slab_debug_report(s, "free of %p: not the start of an object; ignored", (void *) obj);
                else if (tag == SLAB_TAG_FREE)
                        slab_debug_report(s, "double free of object %p; ignored", (void *) obj);
                else
                        slab_debug_report(s, "free of %p: object metadata corrupted (tag 0x%016llx); ignored",
                                    (void *) obj, (unsigned long long) tag);
                return false;
        }
        slab_debug_check_redzones(s, obj, SLAB_RED_ACTIVE);
        memset(obj - s->obj_offset, SLAB_RED_INACTIVE, s->obj_offset);
        memset(obj + s->object_size, SLAB_RED_INACTIVE, s->fp_offset - s->object_size);
        if (s->poison) {
                memset(obj, SLAB_POISON_FREE, s->object_size - 1);
                obj[s->object_size - 1] = (char) SLAB_POISON_END;
        }
        return true;
}


bool slab_debug_env(void) {
        const char *e = secure_getenv(SLAB_DEBUG_ENV);

        return e && (strcmp(e, "1") == 0 || strcmp(e, "yes") == 0 || strcmp(e, "true") == 0);
}


size_t slab_debug_live_objects(mb_cache *s, struct mb_slab *slab, void **ret, size_t max) {
        size_t n = 0, words = DIV_ROUND_UP(s->objects, 64);
        uint64_t freemap[DIV_ROUND_UP(4096, 64)];
        _cleanup_(freep) uint64_t *big = NULL;
        uint64_t *map = freemap;

        if (words > ELEMENTSOF(freemap)) {
                big = calloc(words, sizeof(uint64_t));
                if (!big)
                        return 0;
                map = big;
        } else
                memset(freemap, 0, sizeof(freemap));
        for (void *o = slab->freelist; o; o = slab_get_fp(s, o)) {
                size_t i = (size_t) ((char *) o - slab->page - s->obj_offset) / s->object_bytes;

                map[i / 64] |= UINT64_C(1) << (i % 64);
        }
        for (size_t i = 0; i < s->objects && n < max; i++)
                if (!(map[i / 64] & (UINT64_C(1) << (i % 64))))
                        ret[n++] = slab_page_object(s, slab, i);
        return n;
}

