/* An LD_PRELOAD shim for tests/it/faults.rs: while the file named by TELLTALE_FAULT_FLAG
 * exists, fsync and fdatasync of any file whose path contains TELLTALE_FAULT_PATH fail with EIO,
 * as a failing disk's do. Everything else passes through to the C library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failing(int fd) {
    const char *flag = getenv("TELLTALE_FAULT_FLAG");
    const char *part = getenv("TELLTALE_FAULT_PATH");
    if (!flag || !part || access(flag, F_OK) != 0) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0) return 0;
    path[n] = '\0';
    return strstr(path, part) != NULL;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (failing(fd)) { errno = EIO; return -1; }
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (failing(fd)) { errno = EIO; return -1; }
    return real(fd);
}
