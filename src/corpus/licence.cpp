#include "corpus/licence.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

namespace kforge {
namespace fs = std::filesystem;
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whitespace (and comment leaders) folded to single spaces, lower case: licence texts wrap anywhere.
std::string folded(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '*' || c == '/' || c == '#') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += char(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string read_head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), std::streamsize(n));
  s.resize(size_t(in.gcount()));
  return s;
}

bool licence_file_name(const std::string& name) {
  const std::string l = lower(name);
  return l.rfind("license", 0) == 0 || l.rfind("licence", 0) == 0 || l.rfind("copying", 0) == 0 ||
         l.rfind("eula", 0) == 0;
}

}  // namespace

std::string licence_from_text(std::string_view text) {
  const std::string_view head = text.substr(0, std::min<size_t>(text.size(), 8192));
  const size_t spdx = head.find("SPDX-License-Identifier:");
  if (spdx != std::string_view::npos) {
    size_t b = spdx + 24;
    size_t e = head.find('\n', b);
    if (e == std::string_view::npos) e = head.size();
    std::string id(head.substr(b, e - b));
    // Strip comment closers and blanks: " Apache-2.0 WITH LLVM-exception */"
    const size_t close = id.find("*/");
    if (close != std::string::npos) id.resize(close);
    while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
    size_t k = 0;
    while (k < id.size() && std::isspace(static_cast<unsigned char>(id[k]))) ++k;
    id = id.substr(k);
    if (!id.empty()) return id;
  }
  const std::string f = folded(head);
  auto has = [&](const char* s) { return f.find(s) != std::string::npos; };
  if (has("apache license") && has("version 2.0"))
    return has("llvm exceptions") ? "Apache-2.0 WITH LLVM-exception" : "Apache-2.0";
  if (has("permission is hereby granted, free of charge")) return "MIT";
  if (has("boost software license")) return "BSL-1.0";
  if (has("redistribution and use in source and binary forms"))
    return has("neither the name") || has("may be used to endorse") ? "BSD-3-Clause" : "BSD-2-Clause";
  if (has("licensed deliverables") && has("nvidia")) return "LicenseRef-NVIDIA-Licensed-Deliverables";
  if (has("end user license agreement") && has("nvidia")) return "LicenseRef-NVIDIA-CUDA-EULA";
  if (has("gnu general public license")) return has("lesser") ? "LGPL" : "GPL";
  return "";
}

std::string LicenceFinder::classify_file(const std::string& file) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(file);
  if (it != cache.end()) return it->second;
  const std::string l = licence_from_text(read_head(file, 8192));
  cache[file] = l;
  return l;
}

std::string LicenceFinder::find(const std::string& path, std::string_view content, std::string* how) {
  auto said = [&](const char* h, std::string l) {
    if (how) *how = h;
    return l;
  };
  const std::string_view head = content.substr(0, std::min<size_t>(content.size(), 8192));
  if (head.find("SPDX-License-Identifier:") != std::string_view::npos) {
    std::string l = licence_from_text(head);
    if (!l.empty()) return said("spdx", l);
  }
  if (std::string l = licence_from_text(head); !l.empty()) return said("header", l);
  std::error_code ec;
  const fs::path top = fs::weakly_canonical(this->root.empty() ? fs::path(path).parent_path() : fs::path(this->root), ec);
  fs::path dir = fs::weakly_canonical(fs::path(path).parent_path(), ec);
  std::vector<std::string> visited;
  std::string found, found_file;
  for (int depth = 0; depth < 64 && !dir.empty(); ++depth) {
    auto cached = dir_cache_.find(dir.string());
    if (cached != dir_cache_.end()) {
      found = cached->second.first;
      found_file = cached->second.second;
      break;
    }
    visited.push_back(dir.string());
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file(ec) && licence_file_name(e.path().filename().string())) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      std::string l = classify_file(n);
      if (!l.empty()) {
        found = l;
        found_file = n;
        break;
      }
    }
    if (!found.empty() || dir == top || !dir.has_parent_path() || dir.parent_path() == dir) break;
    const std::string rel = fs::relative(dir, top, ec).string();
    if (ec || rel.rfind("..", 0) == 0) break;  // not under the root
    dir = dir.parent_path();
  }
  for (const std::string& v : visited) dir_cache_[v] = {found, found_file};
  if (!found.empty()) {
    if (how) *how = "file:" + found_file;
    return found;
  }
  if (!package_file.empty()) {
    std::string l = classify_file(package_file);
    if (!l.empty()) {
      if (how) *how = "file:" + package_file;
      return l;
    }
  }
  return said("unknown", "unknown");
}

}  // namespace kforge
