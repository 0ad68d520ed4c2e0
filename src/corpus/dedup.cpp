#include "corpus/dedup.hpp"

#include <cctype>
#include <limits>

namespace kforge {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct Coefficients {
  std::array<uint64_t, kMinHashes> a, b;
  Coefficients() {
    for (int i = 0; i < kMinHashes; ++i) {
      a[i] = splitmix64(2 * i + 1) | 1;  // odd multipliers
      b[i] = splitmix64(2 * i + 2);
    }
  }
};

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

MinHashSignature minhash_signature(std::string_view m) {
  static const Coefficients coef;
  std::vector<uint64_t> tokens;
  for (size_t i = 0; i < m.size();) {
    const char c = m[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    size_t e = i + 1;
    if (word_char(c))
      while (e < m.size() && word_char(m[e])) ++e;
    tokens.push_back(fnv1a(m.substr(i, e - i)));
    i = e;
  }
  MinHashSignature sig;
  sig.fill(std::numeric_limits<uint64_t>::max());
  const size_t shingles = tokens.size() >= size_t(kShingle) ? tokens.size() - kShingle + 1 : (tokens.empty() ? 0 : 1);
  for (size_t s = 0; s < shingles; ++s) {
    uint64_t h = 0;
    for (int k = 0; k < kShingle && s + k < tokens.size(); ++k) h = splitmix64(h ^ tokens[s + k]);
    for (int j = 0; j < kMinHashes; ++j) {
      const uint64_t v = coef.a[j] * h + coef.b[j];
      if (v < sig[j]) sig[j] = v;
    }
  }
  return sig;
}

double estimated_jaccard(const MinHashSignature& a, const MinHashSignature& b) {
  int same = 0;
  for (int i = 0; i < kMinHashes; ++i) same += a[i] == b[i];
  return double(same) / kMinHashes;
}

long NearDuplicateIndex::add(const MinHashSignature& sig) {
  const long id = next_id_++;
  std::vector<uint64_t> keys(bands_.size());
  for (size_t band = 0; band < bands_.size(); ++band) {
    uint64_t h = band;
    for (int r = 0; r < kBandRows; ++r) h = splitmix64(h ^ sig[band * kBandRows + r]);
    keys[band] = h;
    auto it = bands_[band].find(h);
    if (it == bands_[band].end()) continue;
    for (size_t k : it->second)
      if (estimated_jaccard(sig, kept_[k]) >= threshold_) return kept_ids_[k];
  }
  const size_t k = kept_.size();
  kept_.push_back(sig);
  kept_ids_.push_back(id);
  for (size_t band = 0; band < bands_.size(); ++band) bands_[band][keys[band]].push_back(k);
  return -1;
}

}  // namespace kforge
