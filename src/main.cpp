#include "cli/main_command.h"

int main(int argc, char** argv) { return grademl::cli::Main(argc, argv); }
