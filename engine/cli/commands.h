// Subcommands of `neural`. Each takes the arguments after its name and returns the exit code;
// errors are thrown as neural::Error and printed by main.
#pragma once

namespace neural::cli {

int cmd_tokenize(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_repack(int argc, char** argv);
int cmd_verify_store(int argc, char** argv);
int cmd_synth(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_fit(int argc, char** argv);
int cmd_rank(int argc, char** argv);

struct Command {
    const char* name;
    int (*run)(int argc, char** argv);
    const char* summary;
};

}  // namespace neural::cli
