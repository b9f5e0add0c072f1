# cli.plot: `rlctl plot` on synthetic runs (SVG well-formedness checked in C, panels, legend,
# escaping, exact pixels of known points, smoothing, refusals) plus its math module cli/rl_svg.c
# (ticks, labels, trailing mean, XML escaping), compiled into the test directly
rl_add_test(NAME cli.plot SOURCES test_plot.c ${CMAKE_SOURCE_DIR}/cli/rl_svg.c LIBS rl_core m
            LABELS unit TIMEOUT 60)
target_include_directories(test_cli_plot PRIVATE ${CMAKE_SOURCE_DIR}/cli)
add_dependencies(test_cli_plot rlctl)
