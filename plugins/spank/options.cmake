# SPDX-License-Identifier: MIT
# tfslurm_spank_options: the plugin's pure option parsing (options.cpp), a static PIC library
# linked into spank_tfslurm.so and into the unit tests. Included from plugins/spank and, when
# the plugin is not built (no slurm/spank.h), from tests/spank, so the tests never need Slurm.
if(NOT TARGET tfslurm_spank_options)
    add_library(tfslurm_spank_options STATIC ${CMAKE_CURRENT_LIST_DIR}/options.cpp)
    target_include_directories(tfslurm_spank_options PUBLIC ${CMAKE_CURRENT_LIST_DIR})
    target_link_libraries(tfslurm_spank_options PUBLIC tfslurm::lib PRIVATE tfslurm_warnings)
    set_target_properties(tfslurm_spank_options PROPERTIES POSITION_INDEPENDENT_CODE ON
                                                           CXX_VISIBILITY_PRESET hidden
                                                           VISIBILITY_INLINES_HIDDEN ON)
endif()
