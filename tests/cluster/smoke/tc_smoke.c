/* SPDX-License-Identifier: MIT */
/* tfslurm test-cluster smoke plugin: --tc-smoke[=VALUE] sets TC_SMOKE=VALUE:<global task id>
 * in every task (slurm_spank_task_init). Registered with spank_option_register so that sbatch
 * and salloc accept it too. Built and loaded by `scripts/test-cluster smoke`. */
#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

SPANK_PLUGIN(tc_smoke, 1);

static char g_value[256];
static int g_set;

static int tc_smoke_cb(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    const char *v = (optarg != NULL && optarg[0] != '\0') ? optarg : "world";
    if (strlen(v) >= sizeof g_value) {
        slurm_error("tc_smoke: value too long: \"%s\"", v);
        return -1;
    }
    snprintf(g_value, sizeof g_value, "%s", v);
    g_set = 1;
    return 0;
}

static struct spank_option g_option = {
    "tc-smoke", "[VALUE]", "tfslurm test-cluster smoke option: set TC_SMOKE in each task", 2, 0,
    tc_smoke_cb};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_option_register(sp, &g_option) != ESPANK_SUCCESS) {
        slurm_error("tc_smoke: spank_option_register failed");
        return -1;
    }
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!g_set)
        return 0;
    uint32_t gtid = 0;
    if (spank_get_item(sp, S_TASK_GLOBAL_ID, &gtid) != ESPANK_SUCCESS)
        return -1;
    char buf[300];
    snprintf(buf, sizeof buf, "%s:%u", g_value, (unsigned)gtid);
    if (spank_setenv(sp, "TC_SMOKE", buf, 1) != ESPANK_SUCCESS) {
        slurm_error("tc_smoke: spank_setenv failed");
        return -1;
    }
    return 0;
}
