#pragma once
// The crema CLI is a table of verbs; each verb lives in its own tools/<verb>.cpp and registers
// itself with CREMA_REGISTER_VERB. Flags are gflags (Caffe style: -flag=v, --flag v); the flags
// shared by several verbs are defined in tools/flags.cpp and declared in tools/flags.hpp, a
// verb's own flags in its file. Each verb lists the flags it accepts: `crema VERB --help` prints
// them, and a crema flag given to a verb that does not use it is an error.
#include <set>
#include <string>
#include <vector>

namespace crema::cli {

struct Verb {
  const char* name;
  const char* summary;  // one line for `crema --help`
  const char* usage;    // "crema train --solver FILE [--weights A[,B] | --snapshot S] ..."
  std::vector<std::string> flags;  // flag names this verb reads
  // Runs the verb. `args` are the positional arguments after the verb (flags removed).
  // Returns the exit code; errors are thrown (ConfigError -> 2, RuntimeError -> 1).
  int (*run)(const std::vector<std::string>& args);
};

void RegisterVerb(const Verb& verb);
const std::vector<Verb>& Verbs();
// Flags every verb accepts (--plugin, --cpu-engine, ...), handled by crema.cpp before the verb
// runs.
const std::set<std::string>& GlobalFlags();

struct VerbRegisterer {
  explicit VerbRegisterer(const Verb& verb) { RegisterVerb(verb); }
};

}  // namespace crema::cli

#define CREMA_REGISTER_VERB(id, ...) \
  static ::crema::cli::VerbRegisterer crema_verb_registerer_##id(::crema::cli::Verb{__VA_ARGS__})
