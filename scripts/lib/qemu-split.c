/*
 * A QEMU TCG plugin for scripts/arm-cost --kernel: counts the guest's
 * instructions in two sums, those at kernel addresses (at or above
 * `split`, default 0xbf000000: an ARM kernel's modules and the linear map
 * above them under the 3G/1G split) and those below (user space), and
 * hands both out on request, so that a run can be measured in phases
 * without stopping the machine.
 *
 *   -plugin libsplit.so,sock=PATH[,split=ADDR]
 *
 * Each connection to the Unix socket PATH is answered with one line,
 * "USER KERNEL\n", and closed. The totals are also printed when QEMU
 * exits.
 *
 * Written here because QEMU's own plugins count one sum (tests/plugin/insn.c)
 * or blocks by address with a fixed report (contrib/plugins/hotblocks.c),
 * and neither answers during a run. Built against the installed QEMU's own
 * qemu-plugin.h, which arm-cost takes from QEMU's Debian sources.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* Added to by the code TCG generates (one vCPU: the machine has one). A
 * reader on another thread sees each 64-bit sum whole on the x86-64 host. */
static uint64_t user_insns;
static uint64_t kernel_insns;
static uint64_t split = 0xbf000000;
static int listener = -1;

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t *sum = qemu_plugin_insn_vaddr(insn) >= split ? &kernel_insns : &user_insns;
        /* Per instruction, not per block: a block left early (a fault, an
         * interrupt) counts only what ran. */
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, sum, 1);
    }
}

static void *answer(void *unused)
{
    (void)unused;
    for (;;) {
        int c = accept(listener, NULL, NULL);
        if (c < 0) {
            /* A reader that gave up, or a signal: wait for the next one.
             * Anything else will not get better by trying again at once. */
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            perror("split: accept");
            return NULL;
        }
        char line[64];
        int len = snprintf(line, sizeof line, "%llu %llu\n",
                           (unsigned long long)__atomic_load_n(&user_insns, __ATOMIC_RELAXED),
                           (unsigned long long)__atomic_load_n(&kernel_insns, __ATOMIC_RELAXED));
        if (write(c, line, (size_t)len) != len) {
            /* The reader went away: nothing to tell it. */
        }
        close(c);
    }
    return NULL;
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
    fprintf(stderr, "split: user %llu kernel %llu\n", (unsigned long long)user_insns,
            (unsigned long long)kernel_insns);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "sock=", 5) == 0) {
            path = argv[i] + 5;
        } else if (strncmp(argv[i], "split=", 6) == 0) {
            split = strtoull(argv[i] + 6, NULL, 0);
        } else {
            fprintf(stderr, "split: unknown argument %s\n", argv[i]);
            return -1;
        }
    }
    if (path == NULL) {
        fprintf(stderr, "split: sock=PATH is required\n");
        return -1;
    }
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof addr.sun_path) {
        fprintf(stderr, "split: socket path too long: %s\n", path);
        return -1;
    }
    strcpy(addr.sun_path, path);
    unlink(path);
    listener = socket(AF_UNIX, SOCK_STREAM, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(listener, 4) != 0) {
        perror("split: socket");
        return -1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, answer, NULL) != 0) {
        fprintf(stderr, "split: no thread\n");
        return -1;
    }
    pthread_detach(t);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
