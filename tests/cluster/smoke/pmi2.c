/* SPDX-License-Identifier: MIT */
/* tfslurm test-cluster smoke program: every rank puts its host name, fences, and reads all.
 * Built (-lpmi2) and run by `scripts/test-cluster smoke`. */
#include <slurm/pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
    int spawned = 0, size = 0, rank = 0, appnum = 0;
    if (PMI2_Init(&spawned, &size, &rank, &appnum) != PMI2_SUCCESS) {
        fprintf(stderr, "PMI2_Init failed\n");
        return 1;
    }
    const char *ntasks = getenv("SLURM_STEP_NUM_TASKS");
    if (ntasks == NULL || atoi(ntasks) != size) {
        fprintf(stderr, "rank %d: PMI2 size %d != SLURM_STEP_NUM_TASKS=%s (singleton?)\n", rank,
                size, ntasks ? ntasks : "unset");
        return 1;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char key[PMI2_MAX_KEYLEN];
    char value[PMI2_MAX_VALLEN];
    snprintf(key, sizeof key, "tc-smoke-%d", rank);
    if (PMI2_KVS_Put(key, host) != PMI2_SUCCESS || PMI2_KVS_Fence() != PMI2_SUCCESS) {
        fprintf(stderr, "rank %d: put/fence failed\n", rank);
        return 1;
    }
    char peers[8192] = "";
    size_t used = 0;
    for (int r = 0; r < size; r++) {
        int len = 0;
        snprintf(key, sizeof key, "tc-smoke-%d", r);
        if (PMI2_KVS_Get(NULL, r, key, value, sizeof value, &len) != PMI2_SUCCESS) {
            fprintf(stderr, "rank %d: get %s failed\n", rank, key);
            return 1;
        }
        int n = snprintf(peers + used, sizeof peers - used, "%s%s", r ? "," : "", value);
        if (n < 0 || (size_t)n >= sizeof peers - used)
            break;
        used += (size_t)n;
    }
    printf("pmi2 rank=%d size=%d peers=%s\n", rank, size, peers);
    PMI2_Finalize();
    return 0;
}
