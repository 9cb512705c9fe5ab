/* SPDX-License-Identifier: MIT */
/*
 * example.c - the README example: attach to a tenant, allocate pages,
 * write, hand a page out by handle, free, disconnect.
 *
 *   example [SOCKET [TENANT]]   (defaults: $MEMBROKER_SOCKET, tenant "auto")
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <membroker.h>

int main(int argc, char **argv) {
        const char *socket_path = argc > 1 ? argv[1] : NULL;
        const char *tenant = argc > 2 ? argv[2] : NULL;
        void *pages[16];
        mb_client *c;
        char *page;
        int r;

        r = mb_connect(socket_path, tenant, &c);
        if (r < 0) {
                fprintf(stderr, "mb_connect: %s (%s)\n", mb_last_error(), strerror(-r));
                return 1;
        }
        printf("attached to tenant %s: page size %zu, charge batch %u\n", mb_tenant_path(c),
               mb_page_size(c), mb_charge_batch(c));

        page = mb_page_alloc(c); /* from this CPU's stock: no system call */
        if (!page) {
                fprintf(stderr, "mb_page_alloc: %s\n", mb_last_error());
                mb_close(c);
                return 1;
        }
        snprintf(page, mb_page_size(c), "hello from a broker page");
        printf("page handle %llu: \"%s\"\n", (unsigned long long) mb_page_to_handle(c, page),
               (char *) mb_handle_to_page(c, mb_page_to_handle(c, page)));

        r = mb_page_alloc_bulk(c, pages, 16); /* all or nothing */
        if (r < 0)
                fprintf(stderr, "mb_page_alloc_bulk: %s\n", mb_last_error());
        else {
                for (int i = 0; i < 16; i++)
                        memset(pages[i], i, mb_page_size(c));
                printf("16 more pages, %zu bytes written\n", 16 * mb_page_size(c));
                mb_page_free_bulk(c, pages, 16);
        }

        mb_page_free(c, page); /* back to the stock */
        mb_close(c);           /* the daemon uncharges everything */
        printf("done\n");
        return 0;
}
