# the rlctl front door: --version, --help, every command's --help
rl_add_test(NAME cli.help SOURCES test_cli.c LABELS unit TIMEOUT 180)
add_dependencies(test_cli_help rlctl)
