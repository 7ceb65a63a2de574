/*
 * prt_mpi_serial.c — MPI for a job of one process (the contract is in this
 * directory's mpi.h).  Linked into parc_rt_serial in place of an MPI library.
 * Not thread-safe beyond MPI_THREAD_FUNNELED, which is what the runtime asks for.
 */
#include "mpi.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ERR_COMM = 5, ERR_RANK = 6, ERR_TRUNCATE = 15, ERR_REQUEST = 19, ERR_COUNT = 2, ERR_ARG = 12 };

static int g_initialized, g_finalized;
static MPI_Comm g_next_comm = 3;  /* after NULL, WORLD, SELF */
static int g_tag_ub = INT_MAX;

/* ---------------------------------------------------------------- environment */

int MPI_Init(int *argc, char ***argv) {
    (void)argc, (void)argv;
    g_initialized = 1;
    return MPI_SUCCESS;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    *provided = required < MPI_THREAD_FUNNELED ? required : MPI_THREAD_FUNNELED;
    return MPI_Init(argc, argv);
}

int MPI_Initialized(int *flag) { *flag = g_initialized; return MPI_SUCCESS; }
int MPI_Finalized(int *flag) { *flag = g_finalized; return MPI_SUCCESS; }

int MPI_Finalize(void) {
    g_finalized = 1;
    return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
    (void)comm;
    fflush(stdout);
    fflush(stderr);
    _exit(errorcode ? errorcode : 1);
}

double MPI_Wtime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int MPI_Get_processor_name(char *name, int *resultlen) {
    if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0) snprintf(name, MPI_MAX_PROCESSOR_NAME, "localhost");
    name[MPI_MAX_PROCESSOR_NAME - 1] = 0;
    *resultlen = (int)strlen(name);
    return MPI_SUCCESS;
}

int MPI_Error_string(int errorcode, char *string, int *resultlen) {
    const char *what = errorcode == MPI_SUCCESS ? "no error"
                       : errorcode == ERR_COMM  ? "invalid communicator"
                       : errorcode == ERR_RANK  ? "invalid rank (a single-process job has only rank 0)"
                       : errorcode == ERR_TRUNCATE ? "message truncated"
                       : errorcode == ERR_REQUEST ? "invalid request"
                       : errorcode == ERR_COUNT ? "invalid count"
                       : errorcode == ERR_ARG ? "invalid argument"
                                               : "unknown error";
    *resultlen = snprintf(string, MPI_MAX_ERROR_STRING, "%s (single-process MPI, code %d)", what, errorcode);
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- communicators */

static int valid(MPI_Comm comm) { return comm != MPI_COMM_NULL && comm > 0 && comm < g_next_comm; }

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
    if (!valid(comm)) return ERR_COMM;
    *rank = 0;
    return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
    if (!valid(comm)) return ERR_COMM;
    *size = 1;
    return MPI_SUCCESS;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    if (!valid(comm)) return ERR_COMM;
    *newcomm = g_next_comm++;
    return MPI_SUCCESS;
}

int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request) {
    *request = MPI_REQUEST_NULL;  /* complete on return, as every nonblocking collective here */
    return MPI_Comm_dup(comm, newcomm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    (void)key;
    if (!valid(comm)) return ERR_COMM;
    if (color == MPI_UNDEFINED) {
        *newcomm = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    return MPI_Comm_dup(comm, newcomm);
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
    (void)info;
    return MPI_Comm_split(comm, split_type == MPI_UNDEFINED ? MPI_UNDEFINED : 0, key, newcomm);
}

int MPI_Comm_free(MPI_Comm *comm) {
    if (!valid(*comm) || *comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF) return ERR_COMM;
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
    (void)errhandler;  /* errors are always returned */
    return valid(comm) ? MPI_SUCCESS : ERR_COMM;
}

int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *attribute_val, int *flag) {
    if (!valid(comm)) return ERR_COMM;
    *flag = keyval == MPI_TAG_UB;
    if (*flag) *(int **)attribute_val = &g_tag_ub;
    return MPI_SUCCESS;
}

int MPI_Op_create(MPI_User_function *function, int commute, MPI_Op *op) {
    (void)function, (void)commute;  /* one contribution: never combined */
    static MPI_Op next = 4;         /* after SUM, MAX, MIN */
    *op = next++;
    return MPI_SUCCESS;
}

int MPI_Op_free(MPI_Op *op) {
    *op = 0;
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- collectives */

/* A collective over one rank: the send buffer becomes the receive buffer. */
static int copy_in(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Comm comm) {
    if (!valid(comm)) return ERR_COMM;
    if (count < 0 || type <= 0) return ERR_COUNT;
    if (sendbuf != MPI_IN_PLACE && count) memmove(recvbuf, sendbuf, (size_t)count * (size_t)type);
    return MPI_SUCCESS;
}

static int done(MPI_Request *request, int rc) {
    *request = MPI_REQUEST_NULL;
    return rc;
}

int MPI_Barrier(MPI_Comm comm) { return valid(comm) ? MPI_SUCCESS : ERR_COMM; }
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) { return done(request, MPI_Barrier(comm)); }

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    (void)buffer, (void)datatype;
    if (root != 0) return ERR_RANK;
    return copy_in(MPI_IN_PLACE, NULL, count, datatype, comm);
}
int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request) {
    return done(request, MPI_Bcast(buffer, count, datatype, root, comm));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    (void)op;
    return copy_in(sendbuf, recvbuf, count, datatype, comm);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request) {
    return done(request, MPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm));
}

/* One rank's block of a gather-like call: sendcount of sendtype must fill
 * recvcount of recvtype. */
static int copy_block(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm) {
    if (sendbuf != MPI_IN_PLACE && (long long)sendcount * sendtype != (long long)recvcount * recvtype)
        return ERR_TRUNCATE;
    return copy_in(sendbuf, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
    return copy_block(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return done(request, MPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
    return copy_block(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

/* One rank: its block to itself, from sdispls[0] to rdispls[0]. */
int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    if (sdispls[0] < 0 || rdispls[0] < 0) return ERR_COUNT;
    return copy_block((const char *)sendbuf + (size_t)sdispls[0] * (size_t)sendtype, sendcounts[0], sendtype,
                      (char *)recvbuf + (size_t)rdispls[0] * (size_t)recvtype, recvcounts[0], recvtype, comm);
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request) {
    return done(request, MPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                       comm));
}

/* One rank: to itself, from itself. */
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
    (void)sendtag, (void)recvtag, (void)status;
    if (dest != 0 || source != 0) return ERR_RANK;
    return copy_block(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
    (void)op;
    return copy_in(sendbuf, recvbuf, recvcount, datatype, comm);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request) {
    return done(request, MPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm));
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
    if (root != 0) return done(request, ERR_RANK);
    return done(request, copy_block(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
    if (root != 0) return done(request, ERR_RANK);
    char *at = recvbuf && sendbuf != MPI_IN_PLACE ? (char *)recvbuf + (size_t)displs[0] * (size_t)recvtype : recvbuf;
    return done(request, copy_block(sendbuf, sendcount, sendtype, at, recvcounts[0], recvtype, comm));
}

/* ---------------------------------------------------------------- messages to self */

typedef struct message {
    struct message *next;
    MPI_Comm comm;
    int tag;
    size_t bytes;
    char data[];
} message;

typedef struct {
    int used;
    void *buf;
    size_t capacity;
    int tag;
    MPI_Comm comm;
} pending_recv;

enum { MAX_PENDING = 256 };
static message *g_queue_head, *g_queue_tail;  /* in the order sent */
static pending_recv g_pending[MAX_PENDING];   /* request handle = index + 1 */

static message **find_message(MPI_Comm comm, int tag) {
    for (message **m = &g_queue_head; *m; m = &(*m)->next)
        if ((*m)->comm == comm && (tag == MPI_ANY_TAG || (*m)->tag == tag)) return m;
    return NULL;
}

static void fill_status(MPI_Status *status, int tag, size_t bytes) {
    if (status == MPI_STATUS_IGNORE) return;
    status->MPI_SOURCE = 0;
    status->MPI_TAG = tag;
    status->MPI_ERROR = MPI_SUCCESS;
    status->bytes = (long long)bytes;
}

/* Delivers the first matching message into buf: 1 when one was there, 0 when
 * not, -1 when it does not fit. */
static int deliver(void *buf, size_t capacity, int tag, MPI_Comm comm, MPI_Status *status) {
    message **at = find_message(comm, tag);
    if (!at) return 0;
    message *m = *at;
    if (m->bytes > capacity) return -1;
    memcpy(buf, m->data, m->bytes);
    fill_status(status, m->tag, m->bytes);
    *at = m->next;
    if (g_queue_tail == m) {
        g_queue_tail = NULL;
        for (message *p = g_queue_head; p; p = p->next) g_queue_tail = p;
    }
    free(m);
    return 1;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request *request) {
    *request = MPI_REQUEST_NULL;  /* buffered: complete at once */
    if (!valid(comm)) return ERR_COMM;
    if (dest != 0) return ERR_RANK;
    if (count < 0 || datatype <= 0) return ERR_COUNT;
    size_t bytes = (size_t)count * (size_t)datatype;
    message *m = malloc(sizeof *m + bytes);
    if (!m) return MPI_ERR_OTHER;
    *m = (message){NULL, comm, tag, bytes};
    if (bytes) memcpy(m->data, buf, bytes);
    if (g_queue_tail) g_queue_tail->next = m;
    else g_queue_head = m;
    g_queue_tail = m;
    return MPI_SUCCESS;
}

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    MPI_Request r;
    return MPI_Isend(buf, count, datatype, dest, tag, comm, &r);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request) {
    *request = MPI_REQUEST_NULL;
    if (!valid(comm)) return ERR_COMM;
    if (source != 0 && source != MPI_ANY_SOURCE) return ERR_RANK;
    if (count < 0 || datatype <= 0) return ERR_COUNT;
    for (int i = 0; i < MAX_PENDING; i++) {
        if (g_pending[i].used) continue;
        g_pending[i] = (pending_recv){1, buf, (size_t)count * (size_t)datatype, tag, comm};
        *request = i + 1;
        return MPI_SUCCESS;
    }
    return MPI_ERR_OTHER;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    *flag = 1;
    if (*request == MPI_REQUEST_NULL) {
        fill_status(status, MPI_ANY_TAG, 0);
        return MPI_SUCCESS;
    }
    if (*request < 0 || *request > MAX_PENDING || !g_pending[*request - 1].used) return ERR_REQUEST;
    pending_recv *p = &g_pending[*request - 1];
    int got = deliver(p->buf, p->capacity, p->tag, p->comm, status);
    if (got == 0) {
        *flag = 0;
        return MPI_SUCCESS;
    }
    p->used = 0;
    *request = MPI_REQUEST_NULL;
    return got < 0 ? ERR_TRUNCATE : MPI_SUCCESS;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    int flag = 0;
    int rc = MPI_Test(request, &flag, status);
    /* nothing else can send to this process: a receive with no message never completes */
    if (rc == MPI_SUCCESS && !flag) return ERR_REQUEST;
    return rc;
}

/* Each request in turn, as MPI_Test and MPI_Wait; statuses may be MPI_STATUSES_IGNORE. */
int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[]) {
    *flag = 1;
    for (int i = 0; i < count; i++) {
        int one = 0, rc = MPI_Test(&requests[i], &one, statuses ? &statuses[i] : MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
        *flag &= one;
    }
    return MPI_SUCCESS;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    for (int i = 0; i < count; i++) {
        int rc = MPI_Wait(&requests[i], statuses ? &statuses[i] : MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/* A pending receive is dropped: the MPI_Wait that follows completes at once. */
int MPI_Cancel(MPI_Request *request) {
    if (*request == MPI_REQUEST_NULL) return MPI_SUCCESS;
    if (*request < 0 || *request > MAX_PENDING || !g_pending[*request - 1].used) return ERR_REQUEST;
    g_pending[*request - 1].used = 0;
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    MPI_Request r;
    int rc = MPI_Irecv(buf, count, datatype, source, tag, comm, &r);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Wait(&r, status);
    if (r != MPI_REQUEST_NULL) g_pending[r - 1].used = 0;
    return rc;
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    if (!valid(comm)) return ERR_COMM;
    if (source != 0 && source != MPI_ANY_SOURCE) return ERR_RANK;
    message **at = find_message(comm, tag);
    *flag = at != NULL;
    if (at) fill_status(status, (*at)->tag, (*at)->bytes);
    return MPI_SUCCESS;
}

int MPI_Request_free(MPI_Request *request) {
    if (*request > 0 && *request <= MAX_PENDING) g_pending[*request - 1].used = 0;
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count) {
    if (datatype <= 0) return ERR_COUNT;
    *count = status->bytes % datatype ? MPI_UNDEFINED : (int)(status->bytes / datatype);
    return MPI_SUCCESS;
}
