/* An LD_PRELOAD shim for tests/it/faults.rs, failing the write-ahead log's disk on demand. For
 * files whose path contains TELLTALE_FAULT_PATH:
 * - while the file named by TELLTALE_FAULT_FLAG exists, fsync and fdatasync fail with EIO, as a
 *   failing disk's do;
 * - while the file named by TELLTALE_FAULT_FULL exists, write, pwrite and pwrite64 fail with
 *   ENOSPC, as on a full disk.
 * - when TELLTALE_FSYNC_LOG names a file, the path of every file or directory fsync'd (or
 *   fdatasync'd) successfully is appended to it, one per line.
 * Everything else passes through to the C library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int failing(int fd, const char *flag_variable) {
    const char *flag = getenv(flag_variable);
    const char *part = getenv("TELLTALE_FAULT_PATH");
    if (!flag || !part || access(flag, F_OK) != 0) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0) return 0;
    path[n] = '\0';
    return strstr(path, part) != NULL;
}

static void log_sync(int fd) {
    const char *log = getenv("TELLTALE_FSYNC_LOG");
    if (!log) return;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 2);
    if (n < 0) return;
    path[n] = '\n';
    path[n + 1] = '\0';
    FILE *out = fopen(log, "a");
    if (!out) return;
    fputs(path, out);
    fclose(out);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (failing(fd, "TELLTALE_FAULT_FLAG")) { errno = EIO; return -1; }
    int result = real(fd);
    if (result == 0) log_sync(fd);
    return result;
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (failing(fd, "TELLTALE_FAULT_FLAG")) { errno = EIO; return -1; }
    int result = real(fd);
    if (result == 0) log_sync(fd);
    return result;
}

ssize_t write(int fd, const void *buffer, size_t count) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (failing(fd, "TELLTALE_FAULT_FULL")) { errno = ENOSPC; return -1; }
    return real(fd, buffer, count);
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    if (failing(fd, "TELLTALE_FAULT_FULL")) { errno = ENOSPC; return -1; }
    return real(fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off64_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off64_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off64_t))dlsym(RTLD_NEXT, "pwrite64");
    if (failing(fd, "TELLTALE_FAULT_FULL")) { errno = ENOSPC; return -1; }
    return real(fd, buffer, count, offset);
}
