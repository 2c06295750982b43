#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A stand-in for a TensorFlow parameter-server trainer, for `tfslurm run` demos:
#
#   tfslurm run --local 4 --ps 1 -- examples/trainer.sh          # in Slurm: srun tfslurm run ...
#
# - a ps serves "forever", like tf.distribute.Server.join(): only its launcher can stop it;
# - a worker (or the chief) trains for a few steps and exits 0.
# DEMO_FAIL_RANK=N makes rank N crash (exit 3) in the middle of its training.
# It reads what tfslurm gives every task: TFSLURM_ROLE, TFSLURM_RANK, TF_CONFIG, ...
set -u

role=${TFSLURM_ROLE:-worker}
rank=${TFSLURM_RANK:-0}
me="[$role rank $rank]"

echo "$me TF_CONFIG=$TF_CONFIG"

case $role in
ps | evaluator)
    trap 'echo "$me SIGTERM: saving state and shutting down"; exit 0' TERM
    echo "$me serving until tfslurm stops me"
    while :; do
        # sleep in the background so that the trap runs at once
        sleep 1 &
        wait $!
    done
    ;;
*)
    steps=${DEMO_STEPS:-3}
    step=1
    while [ "$step" -le "$steps" ]; do
        echo "$me training step $step/$steps"
        sleep 0.3
        if [ "${DEMO_FAIL_RANK:-}" = "$rank" ] && [ "$step" -eq 2 ]; then
            echo "$me crashing (DEMO_FAIL_RANK=$rank)"
            exit 3
        fi
        step=$((step + 1))
    done
    echo "$me done"
    ;;
esac
