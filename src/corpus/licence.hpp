// The licence of a corpus file, as an SPDX expression where one can be told:
//  1. an "SPDX-License-Identifier:" line in the file's first 8 KiB;
//  2. else a licence header recognised in those 8 KiB (Apache-2.0, MIT, BSD-2/3-Clause, BSL-1.0,
//     NVIDIA's proprietary "Licensed Deliverables" notice -> LicenseRef-NVIDIA-Licensed-Deliverables,
//     the CUDA EULA -> LicenseRef-NVIDIA-CUDA-EULA);
//  3. else the package's licence file: the nearest LICENSE*, LICENCE*, COPYING* or EULA* file in
//     the file's folder or a folder above it up to the source root, else the licence file the
//     source root names (a wheel's dist-info licence), classified by 2;
//  4. else "unknown".
#pragma once
#include <map>
#include <string>
#include <utility>
#include <string_view>

namespace kforge {

// Steps 1 and 2 on a text; "" when nothing is recognised.
std::string licence_from_text(std::string_view text);

struct LicenceFinder {
  LicenceFinder(std::string root_dir, std::string package_licence_file)
      : root(std::move(root_dir)), package_file(std::move(package_licence_file)) {}
  std::string root;           // the source root (step 3 does not look above it)
  std::string package_file;   // the package's own licence file (may be empty)
  // The licence of `path` whose content is `content`, and where it was found ("spdx", "header",
  // "file:<path of the licence file>", "unknown").
  std::string find(const std::string& path, std::string_view content, std::string* how = nullptr);

 private:
  std::string classify_file(const std::string& file);
  std::map<std::string, std::pair<std::string, std::string>> dir_cache_;  // folder -> (licence, file)
};

}  // namespace kforge
