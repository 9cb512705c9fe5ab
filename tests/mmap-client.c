/* SPDX-License-Identifier: MIT */
/*
 * mmap-client - a program that maps its own memory, driven line by line on
 * stdin (tests/test-preload-mmap.sh runs it under membroker-run).  Each
 * command answers one line on stdout: "ok ..." or "err ERRNO-NAME".
 *
 *   map NAME BYTES [ro|none] [noreserve]  mmap(MAP_PRIVATE|MAP_ANONYMOUS),
 *                                         every page written when writable
 *   unmap NAME [OFF LEN]                  munmap all of it, or a part
 *   protect NAME OFF LEN rw|ro|none       mprotect a part (rw: then written)
 *   fixed NAME OFF LEN                    a writable MAP_FIXED mapping over a part
 *   remap NAME BYTES                      mremap(MREMAP_MAYMOVE), then written
 *   fill BYTES CHUNK                      map CHUNK-sized pieces until BYTES or
 *                                         a failure: "ok MAPPED" / "err ENOMEM MAPPED"
 *   fork-unmap NAME                       a fork() child unmaps NAME and exits
 *   nocheck BYTES                         malloc(BYTES) and write it unchecked
 *   quit
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAPS_MAX 64

static struct {
        char name[32];
        unsigned char *p;
        size_t len;
} maps[MAPS_MAX];

static size_t page;

static int find(const char *name) {
        for (int i = 0; i < MAPS_MAX; i++)
                if (maps[i].p && strcmp(maps[i].name, name) == 0)
                        return i;
        return -1;
}

static int slot(const char *name) {
        int i = find(name);

        for (int k = 0; i < 0 && k < MAPS_MAX; k++)
                if (!maps[k].p)
                        i = k;
        if (i >= 0)
                snprintf(maps[i].name, sizeof(maps[i].name), "%s", name);
        return i;
}

static void touch(unsigned char *p, size_t len) {
        for (size_t o = 0; o < len; o += page)
                p[o] = 1;
}

static void err(int e) {
        printf("err %s\n", e == ENOMEM ? "ENOMEM" : e == EINVAL ? "EINVAL" : strerror(e));
}

static void cmd_map(char *name, size_t len, const char *a1, const char *a2) {
        int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS, i = slot(name);
        const char *a[2] = { a1, a2 };
        void *p;

        for (int k = 0; k < 2; k++) {
                if (!a[k])
                        continue;
                if (strcmp(a[k], "ro") == 0)
                        prot = PROT_READ;
                else if (strcmp(a[k], "none") == 0)
                        prot = PROT_NONE;
                else if (strcmp(a[k], "noreserve") == 0)
                        flags |= MAP_NORESERVE;
        }
        if (i < 0)
                return err(ENOSPC);
        p = mmap(NULL, len, prot, flags, -1, 0);
        if (p == MAP_FAILED)
                return err(errno);
        maps[i].p = p;
        maps[i].len = len;
        if (prot & PROT_WRITE)
                touch(p, len);
        printf("ok\n");
}

static void cmd_fill(size_t total, size_t chunk) {
        size_t done = 0;

        while (done < total) {
                void *p = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

                if (p == MAP_FAILED) {
                        printf("err %s %zu\n", errno == ENOMEM ? "ENOMEM" : strerror(errno), done);
                        return;
                }
                touch(p, chunk);
                done += chunk;
        }
        printf("ok %zu\n", done);
}

int main(void) {
        char line[256];

        page = (size_t) sysconf(_SC_PAGESIZE);
        setvbuf(stdout, NULL, _IOLBF, 0);
        while (fgets(line, sizeof(line), stdin)) {
                char *w[6] = {};
                int n = 0, i;

                for (char *t = strtok(line, " \t\n"); t && n < 6; t = strtok(NULL, " \t\n"))
                        w[n++] = t;
                if (n == 0)
                        continue;
                if (strcmp(w[0], "quit") == 0)
                        break;
                if (strcmp(w[0], "map") == 0 && n >= 3) {
                        cmd_map(w[1], strtoull(w[2], NULL, 0), w[3], w[4]);
                } else if (strcmp(w[0], "fill") == 0 && n == 3) {
                        cmd_fill(strtoull(w[1], NULL, 0), strtoull(w[2], NULL, 0));
                } else if (strcmp(w[0], "nocheck") == 0 && n == 2) {
                        size_t len = strtoull(w[1], NULL, 0);
                        unsigned char *p = malloc(len);

                        memset(p, 1, len); /* SIGSEGV when malloc() said no */
                        printf("ok %d\n", p[len - 1]);
                } else if ((i = n >= 2 ? find(w[1]) : -1) < 0) {
                        err(ENOENT);
                } else if (strcmp(w[0], "unmap") == 0) {
                        size_t off = n >= 4 ? strtoull(w[2], NULL, 0) : 0;
                        size_t len = n >= 4 ? strtoull(w[3], NULL, 0) : maps[i].len;

                        if (munmap(maps[i].p + off, len) < 0)
                                err(errno);
                        else {
                                if (n < 4)
                                        maps[i].p = NULL;
                                else if (off + len >= maps[i].len)
                                        maps[i].len = off; /* the tail went */
                                printf("ok\n");
                        }
                } else if (strcmp(w[0], "protect") == 0 && n == 5) {
                        size_t off = strtoull(w[2], NULL, 0), len = strtoull(w[3], NULL, 0);
                        int prot = strcmp(w[4], "rw") == 0   ? PROT_READ | PROT_WRITE
                                   : strcmp(w[4], "ro") == 0 ? PROT_READ
                                                             : PROT_NONE;

                        if (mprotect(maps[i].p + off, len, prot) < 0)
                                err(errno);
                        else {
                                if (prot & PROT_WRITE)
                                        touch(maps[i].p + off, len);
                                printf("ok\n");
                        }
                } else if (strcmp(w[0], "fixed") == 0 && n == 4) {
                        size_t off = strtoull(w[2], NULL, 0), len = strtoull(w[3], NULL, 0);
                        void *p = mmap(maps[i].p + off, len, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

                        if (p == MAP_FAILED)
                                err(errno);
                        else {
                                touch(p, len);
                                printf("ok\n");
                        }
                } else if (strcmp(w[0], "remap") == 0 && n == 3) {
                        size_t len = strtoull(w[2], NULL, 0);
                        void *p = mremap(maps[i].p, maps[i].len, len, MREMAP_MAYMOVE);

                        if (p == MAP_FAILED)
                                err(errno);
                        else {
                                maps[i].p = p;
                                maps[i].len = len;
                                touch(p, len);
                                printf("ok\n");
                        }
                } else if (strcmp(w[0], "fork-unmap") == 0) {
                        pid_t pid = fork();
                        int st = 0;

                        if (pid == 0)
                                _exit(munmap(maps[i].p, maps[i].len) == 0 ? 0 : 1);
                        if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                                err(ECHILD);
                        else
                                printf("ok\n");
                } else {
                        err(EINVAL);
                }
        }
        return 0;
}
