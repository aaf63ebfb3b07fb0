#include "remote_launch.h"

#include <stdexcept>

namespace hoop::run {

std::vector<std::string> split_command_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string::npos) throw std::invalid_argument("unclosed ' in '" + text + "'");
      word.append(text, i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() &&
            (text[j + 1] == '"' || text[j + 1] == '\\' || text[j + 1] == '$' || text[j + 1] == '`'))
          ++j;
        word += text[j];
      }
      if (j >= text.size()) throw std::invalid_argument("unclosed \" in '" + text + "'");
      i = j;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-+./:=,@%") == std::string::npos;
  if (plain) return word;
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

namespace {

bool is_ssh(const std::string& program) {
  const size_t slash = program.rfind('/');
  const std::string base = slash == std::string::npos ? program : program.substr(slash + 1);
  return base == "ssh";
}

std::string replace_host(std::string word, const std::string& host) {
  for (size_t at = word.find("{host}"); at != std::string::npos; at = word.find("{host}", at + host.size()))
    word.replace(at, 6, host);
  return word;
}

}  // namespace

RemoteCommand remote_command(const std::string& launcher_template, const std::string& host,
                             const std::vector<std::string>& command,
                             const std::vector<std::pair<std::string, std::string>>& variables,
                             const std::string& workdir) {
  RemoteCommand out;
  for (const auto& word : split_command_words(launcher_template)) out.argv.push_back(replace_host(word, host));
  if (out.argv.empty()) throw std::invalid_argument("--launcher is empty");
  out.via_shell = is_ssh(out.argv.front());
  if (!out.via_shell) {
    out.argv.insert(out.argv.end(), command.begin(), command.end());
    return out;
  }
  // Where hoop-run runs when the remote host has that directory (shared file systems), else
  // the login directory; then the job's variables and the command.
  std::string line;
  std::string env_words;
  for (const auto& [name, value] : variables) {
    if (name == "HOOP_SECRET") {
      line = "IFS= read -r HOOP_SECRET && export HOOP_SECRET; ";
      out.stdin_text = value + "\n";
    } else {
      env_words += " " + shell_quote(name + "=" + value);
    }
  }
  line += "cd " + shell_quote(workdir) + " 2>/dev/null; exec env" + env_words;
  for (const auto& word : command) line += " " + shell_quote(word);
  out.argv.push_back(line);
  return out;
}

}  // namespace hoop::run
