// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Plan settings as text: the one entry point that turns a `key=value` setting, whichever face
/// it came from, into PlanOptions.

#include <tfslurm/plan.hpp>

#include <string_view>

namespace tfslurm {

/// Apply one `key=value` setting to `options`. The keys are the snake_case names shared by
/// plugstack.conf arguments, the SPANK option, `TFSLURM_*` variables and (in kebab-case) the
/// CLI: `ps`, `chief`, `evaluator` (value `1`/`0`/`yes`/`no`/`true`/`false`, empty = true),
/// `roles`, `ps_placement` (`first`/`spread`), `layout` (`native`/`tf-compat`), `port_base`,
/// `address` (`name`/`ip`), `host_pattern`, `gpus_per_task`, `gpus_per_node` (tf-compat only),
/// `rpc_layer`.
/// Input: key `ps`, value `2`. Output: options.counts.ps == 2.
/// \throws Error (Errc::invalid_argument) naming `subject` for an unknown key or a bad value.
void apply_plan_setting(PlanOptions& options,
                        std::string_view key,
                        std::string_view value,
                        std::string_view subject);

} // namespace tfslurm
