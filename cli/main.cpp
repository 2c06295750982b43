// SPDX-License-Identifier: MIT
#include "app.hpp"

int main(int argc, char** argv) {
    return tfslurm::cli::run_main(argc, argv);
}
