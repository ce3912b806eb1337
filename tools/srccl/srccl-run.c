/* srccl-run: the local launcher. Forks N ranks of a program with the
 * rendezvous in their environment, waits for them, and makes sure none
 * outlives a failure or the time limit.
 *
 *   srccl-run -n N [-t SECONDS] [-k] [--env srccl|torch|ompi|slurm] [--bind auto|core|none]
 *             [--] prog args...
 *
 * Each rank gets SRCCL_RANK, SRCCL_NRANKS, SRCCL_LOCAL_RANK and
 * SRCCL_ROOT_ADDR=127.0.0.1:<free port> (or the variables torchrun, Open MPI
 * or Slurm would set, with --env, to exercise srcclCommInitFromEnv). Each
 * rank runs in its own process group, so that killing it takes its children.
 * With --bind auto (the default) and no more ranks than the CPUs srccl-run
 * may use, rank i is bound to the i-th of them, as mpirun binds to cores
 * when a job fits: two unbound ranks that wait on each other get pulled
 * onto one CPU by the scheduler's wake-affine placement, and a wait then
 * lasts until the waiter gives up its CPU (srccl's 8 B all-reduce at 2
 * ranks: 0.5 us bound, 7..500 us unbound on a loaded host; docs/SRCCL.md,
 * "One host"). --bind core insists (ranks beyond the CPUs share them
 * round robin), --bind none leaves placement to the scheduler.
 * Exit status: 0 if every rank exits 0; otherwise the first failure's
 * status (128 + signal for a signal), after the other ranks are stopped
 * (SIGTERM, then SIGKILL 2 s later) unless -k; 124 on timeout. */
#include <arpa/inet.h>
#include <sched.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum env_style { ENV_SRCCL, ENV_TORCH, ENV_OMPI, ENV_SLURM };
enum bind_style { BIND_AUTO, BIND_CORE, BIND_NONE };

struct rank {
    pid_t pid;
    bool running;
    int status;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: srccl-run -n N [-t SECONDS] [-k] [--env srccl|torch|ompi|slurm]\n"
               "                 [--bind auto|core|none] [--] program [args...]\n"
               "  -n N          number of ranks (1..1024)\n"
               "  -t SECONDS    kill every rank after this long (exit 124); default: none\n"
               "  -k            keep going: do not stop the others when a rank fails\n"
               "  --env STYLE   the variables to set: srccl (default), torch (RANK, WORLD_SIZE,\n"
               "                MASTER_ADDR, MASTER_PORT), ompi (OMPI_COMM_WORLD_*) or slurm\n"
               "                (SLURM_PROCID, SLURM_NTASKS); SRCCL_ROOT_ADDR for ompi/slurm\n");
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A TCP port free on 127.0.0.1 right now (the root binds it shortly). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(sa);
    int port = -1;
    if (!bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
        !getsockname(fd, (struct sockaddr *)&sa, &l))
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static void setenvf(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void setenvf(const char *name, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    setenv(name, buf, 1);
}

static void child_env(enum env_style style, int rank, int n, int port)
{
    /* Only the chosen launcher's variables: srccl picks the first it finds. */
    static const char *const all[] = {"SRCCL_RANK",           "SRCCL_NRANKS",
                                      "SRCCL_LOCAL_RANK",     "RANK",
                                      "WORLD_SIZE",           "LOCAL_RANK",
                                      "LOCAL_WORLD_SIZE",     "MASTER_ADDR",
                                      "MASTER_PORT",          "OMPI_COMM_WORLD_RANK",
                                      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                      "SLURM_PROCID",         "SLURM_NTASKS",
                                      "SLURM_LOCALID",        "SRCCL_ROOT_ADDR"};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        unsetenv(all[i]);
    switch (style) {
    case ENV_SRCCL:
        setenvf("SRCCL_RANK", "%d", rank);
        setenvf("SRCCL_NRANKS", "%d", n);
        setenvf("SRCCL_LOCAL_RANK", "%d", rank);
        setenvf("SRCCL_ROOT_ADDR", "127.0.0.1:%d", port);
        break;
    case ENV_TORCH: /* srccl takes MASTER_PORT + 1 */
        setenvf("RANK", "%d", rank);
        setenvf("WORLD_SIZE", "%d", n);
        setenvf("LOCAL_RANK", "%d", rank);
        setenvf("LOCAL_WORLD_SIZE", "%d", n);
        setenvf("MASTER_ADDR", "127.0.0.1");
        setenvf("MASTER_PORT", "%d", port - 1);
        break;
    case ENV_OMPI:
        setenvf("OMPI_COMM_WORLD_RANK", "%d", rank);
        setenvf("OMPI_COMM_WORLD_SIZE", "%d", n);
        setenvf("OMPI_COMM_WORLD_LOCAL_RANK", "%d", rank);
        setenvf("SRCCL_ROOT_ADDR", "127.0.0.1:%d", port);
        break;
    case ENV_SLURM:
        setenvf("SLURM_PROCID", "%d", rank);
        setenvf("SLURM_NTASKS", "%d", n);
        setenvf("SLURM_LOCALID", "%d", rank);
        setenvf("SRCCL_ROOT_ADDR", "127.0.0.1:%d", port);
        break;
    }
    setenvf("SRCCL_JOB_ID", "srccl-run-%d-%d", (int)getppid(), port);
}

static int exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

static void describe(int rank, pid_t pid, int status)
{
    if (WIFSIGNALED(status))
        fprintf(stderr, "srccl-run: rank %d (pid %d) killed by signal %d (%s)\n", rank, (int)pid,
                WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        fprintf(stderr, "srccl-run: rank %d (pid %d) exited with status %d\n", rank, (int)pid,
                exit_code(status));
}

static void signal_all(struct rank *r, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (r[i].running) {
            kill(-r[i].pid, sig); /* its process group: the rank and its children */
            kill(r[i].pid, sig);
        }
}

static int running_cnt(const struct rank *r, int n)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += r[i].running;
    return c;
}

/* Reaps what has exited; returns the index of a rank reaped with a failure
 * status, or -1. */
static int reap(struct rank *r, int n, int *first_fail)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < n; i++) {
            if (r[i].pid != pid || !r[i].running)
                continue;
            r[i].running = false;
            r[i].status = status;
            if (exit_code(status) != 0) {
                describe(i, pid, status);
                if (*first_fail < 0)
                    *first_fail = i;
            }
        }
    }
    return *first_fail;
}

/* Binds the calling process to the (rank mod count)-th CPU of set. */
static void bind_rank(const cpu_set_t *set, int rank)
{
    int cnt = CPU_COUNT(set), want = rank % cnt;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, set) || want--)
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof(one), &one))
            fprintf(stderr, "srccl-run: rank %d: binding to CPU %d: %s (left unbound)\n", rank, cpu,
                    strerror(errno));
        return;
    }
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
    got_signal = sig;
}

int main(int argc, char **argv)
{
    int n = 0;
    double timeout_s = 0;
    bool keep_going = false;
    enum env_style style = ENV_SRCCL;
    enum bind_style bind = BIND_AUTO;
    static const struct option opts[] = {{"env", required_argument, NULL, 'E'},
                                         {"bind", required_argument, NULL, 'B'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "+n:t:kh", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            n = atoi(optarg);
            break;
        case 't':
            timeout_s = atof(optarg);
            break;
        case 'k':
            keep_going = true;
            break;
        case 'E':
            if (!strcmp(optarg, "srccl"))
                style = ENV_SRCCL;
            else if (!strcmp(optarg, "torch"))
                style = ENV_TORCH;
            else if (!strcmp(optarg, "ompi"))
                style = ENV_OMPI;
            else if (!strcmp(optarg, "slurm"))
                style = ENV_SLURM;
            else {
                fprintf(stderr, "srccl-run: --env %s: expected srccl, torch, ompi or slurm\n",
                        optarg);
                return 2;
            }
            break;
        case 'B':
            if (!strcmp(optarg, "auto"))
                bind = BIND_AUTO;
            else if (!strcmp(optarg, "core"))
                bind = BIND_CORE;
            else if (!strcmp(optarg, "none"))
                bind = BIND_NONE;
            else {
                fprintf(stderr, "srccl-run: --bind %s: expected auto, core or none\n", optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (n < 1 || n > 1024 || optind >= argc || timeout_s < 0) {
        usage(stderr);
        return 2;
    }
    int port = free_port();
    if (port < 2) {
        fprintf(stderr, "srccl-run: no free TCP port on 127.0.0.1: %s\n", strerror(errno));
        return 1;
    }

    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (sched_getaffinity(0, sizeof(cpus), &cpus) || !CPU_COUNT(&cpus) ||
        (bind == BIND_AUTO && n > CPU_COUNT(&cpus)))
        bind = BIND_NONE;

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    struct rank *r = calloc((size_t)n, sizeof(*r));
    if (!r)
        return 1;
    int first_fail = -1;
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "srccl-run: fork: %s\n", strerror(errno));
            signal_all(r, n, SIGKILL);
            while (wait(NULL) > 0)
                ;
            return 1;
        }
        if (pid == 0) {
            setpgid(0, 0);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            child_env(style, i, n, port);
            if (bind != BIND_NONE)
                bind_rank(&cpus, i);
            execvp(argv[optind], &argv[optind]);
            fprintf(stderr, "srccl-run: %s: %s\n", argv[optind], strerror(errno));
            _exit(127);
        }
        setpgid(pid, pid); /* also here: no race with an early kill */
        r[i].pid = pid;
        r[i].running = true;
    }

    uint64_t start = now_ms();
    uint64_t deadline = timeout_s > 0 ? start + (uint64_t)(timeout_s * 1000) : UINT64_MAX;
    uint64_t kill_at = UINT64_MAX; /* SIGKILL after the grace period */
    bool timed_out = false, stopping = false;
    while (running_cnt(r, n) > 0) {
        reap(r, n, &first_fail);
        if (!running_cnt(r, n))
            break;
        uint64_t now = now_ms();
        if (!stopping && got_signal) {
            fprintf(stderr, "srccl-run: %s: stopping the ranks\n", strsignal(got_signal));
            stopping = true;
        }
        if (!stopping && now >= deadline) {
            fprintf(stderr, "srccl-run: timeout after %.1f s: stopping %d rank(s)\n", timeout_s,
                    running_cnt(r, n));
            timed_out = true;
            stopping = true;
        }
        if (!stopping && first_fail >= 0 && !keep_going) {
            fprintf(stderr, "srccl-run: rank %d failed: stopping the other %d rank(s)\n",
                    first_fail, running_cnt(r, n));
            stopping = true;
        }
        if (stopping && kill_at == UINT64_MAX) {
            signal_all(r, n, SIGTERM);
            kill_at = now + 2000;
        }
        if (now >= kill_at) {
            signal_all(r, n, SIGKILL);
            kill_at = now + 1000000; /* once */
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int rc = 0;
    if (timed_out)
        rc = 124;
    else if (got_signal)
        rc = 128 + got_signal;
    else if (first_fail >= 0)
        rc = exit_code(r[first_fail].status);
    free(r);
    return rc;
}
