/* C ABI between the engine and the persistent worker-team library neural_cpu_persistent
 * (libneural_cpu_persistent.so / neural_cpu_persistent.dll), loaded at run time through
 * platform/shared_library.h. Plain C types only, so either side may be built by another
 * compiler; exceptions never cross it (task functions must not throw).
 *
 * The library exports one symbol, NEURAL_TEAM_ENTRY, of type neural_team_entry_fn: given the
 * ABI version the engine was built with, it returns its vtable or NULL when it cannot serve it.
 */
#ifndef NEURAL_CPU_PERSISTENT_TEAM_ABI_H
#define NEURAL_CPU_PERSISTENT_TEAM_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEURAL_TEAM_ABI_VERSION 1u
#define NEURAL_TEAM_ENTRY "neural_cpu_persistent_team_v1"

/* run() results. */
#define NEURAL_TEAM_OK 0
/* The team cannot run this job (nested call from one of its own tasks, floating-point control
 * state it does not reproduce, ...): the caller runs it on the reference team instead. */
#define NEURAL_TEAM_UNSUPPORTED 1

/* One phase: tasks [0, n_tasks) are claimed dynamically; fn(ctx, task, worker) runs each once,
 * worker in [0, size), 0 = the calling thread. Phase p + 1 starts after every task of phase p
 * returned and its stores are visible. */
typedef void (*neural_team_task_fn)(void* ctx, int64_t task, int32_t worker);
typedef struct neural_team_phase {
    int64_t n_tasks;
    neural_team_task_fn fn;
    void* ctx;
} neural_team_phase;

typedef struct neural_team_config {
    uint32_t struct_size; /* sizeof(neural_team_config) */
    int32_t threads;      /* team size including the caller, >= 1 */
    int32_t pin;          /* nonzero: pin worker w to logical CPU w (caller not pinned) */
    int32_t spin_us;      /* idle workers spin (pause) this long, then yield */
    int32_t park_us;      /* ... and park (OS wait) after this long without work; < 0: never */
} neural_team_config;

typedef struct neural_team_vtable {
    uint32_t abi_version; /* NEURAL_TEAM_ABI_VERSION */
    uint32_t struct_size; /* sizeof(neural_team_vtable) */
    /* Starts a team. NULL on failure, with a message in error[error_size]. */
    void* (*create)(const neural_team_config* config, char* error, size_t error_size);
    /* Stops and joins the workers (serialized after any running job). */
    void (*destroy)(void* team);
    int32_t (*size)(void* team);
    /* Runs the phases with the caller's floating-point control word `fp_control` (x86: MXCSR)
     * installed in every worker. NEURAL_TEAM_OK or NEURAL_TEAM_UNSUPPORTED (nothing ran). Jobs
     * from several threads are serialized. */
    int32_t (*run)(void* team, const neural_team_phase* phases, int32_t n_phases,
                   uint32_t fp_control);
    /* Restarts the workers with a new configuration (serialized with jobs). 0 on success. */
    int32_t (*configure)(void* team, const neural_team_config* config, char* error,
                         size_t error_size);
    /* Jobs run by the team (not counting UNSUPPORTED returns). */
    uint64_t (*jobs)(void* team);
} neural_team_vtable;

typedef const neural_team_vtable* (*neural_team_entry_fn)(uint32_t abi_version);

#ifdef __cplusplus
}
#endif

#endif
