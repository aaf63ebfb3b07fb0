// Starting a rank on another host through a launcher command ("ssh {host}", "ip netns exec
// {host}"): the launcher's words with {host} replaced, then the rank's command.
//  - ssh (and anything whose program is named ssh) hands the remote shell one command line:
//    the rank's command is passed as one shell-quoted string, preceded by `cd` to hoop-run's
//    directory and `env` with the variables hoop-run sets for the rank (ssh does not carry
//    the environment). HOOP_SECRET is not among them: a command line is visible to every user
//    of both hosts (ps), so the remote shell reads the secret from its stdin instead.
//  - any other launcher execs its arguments: the command follows as separate words, and the
//    launcher itself starts with the rank's whole environment, which it passes on.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hoop::run {

// Splits a command template into words as a POSIX shell would for quoting ('...', "...", \x);
// no expansions. Throws std::invalid_argument on an unclosed quote.
std::vector<std::string> split_command_words(const std::string& text);

// A word quoted for a POSIX shell ('it'\''s').
std::string shell_quote(const std::string& word);

struct RemoteCommand {
  std::vector<std::string> argv;  // argv[0]: the launcher's program, to be resolved in PATH
  bool via_shell = false;         // ssh-style: the command is one string for a remote shell
  std::string stdin_text;         // to be written to the launcher's stdin (ssh: the secret)
};

// The launcher's command line starting `command` on `host` with `variables` set there.
RemoteCommand remote_command(const std::string& launcher_template, const std::string& host,
                             const std::vector<std::string>& command,
                             const std::vector<std::pair<std::string, std::string>>& variables,
                             const std::string& workdir);

}  // namespace hoop::run
