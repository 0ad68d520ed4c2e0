// Near-duplicate detection for the corpus: MinHash signatures over token shingles, banded LSH.
//
// Tokens are identifiers, numbers and single punctuation characters of the masked source
// (chunker.hpp: comments, literal contents and preprocessor lines blanked), so licence headers
// and comments do not make files look alike. Shingles are kShingle consecutive tokens; the
// signature holds kMinHashes minima of independent hash functions; LSH bands of kBandRows rows
// propose candidate pairs, and a candidate is a near duplicate when the estimated Jaccard
// similarity (the fraction of equal signature entries) is at least the threshold (default 0.8).
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kforge {

inline constexpr int kShingle = 5;
inline constexpr int kMinHashes = 128;
inline constexpr int kBandRows = 4;  // 32 bands: pairs above ~0.5 similarity are almost surely proposed
inline constexpr double kDefaultNearThreshold = 0.8;

using MinHashSignature = std::array<uint64_t, kMinHashes>;

// The signature of already-masked source text.
MinHashSignature minhash_signature(std::string_view masked);
double estimated_jaccard(const MinHashSignature& a, const MinHashSignature& b);

// Documents added in order; add() returns the index of an earlier document it nearly duplicates
// (estimated Jaccard >= threshold), or -1 after keeping it for later comparisons.
class NearDuplicateIndex {
 public:
  explicit NearDuplicateIndex(double threshold = kDefaultNearThreshold) : threshold_(threshold) {}
  long add(const MinHashSignature& sig);

 private:
  double threshold_;
  std::vector<MinHashSignature> kept_;
  std::vector<long> kept_ids_;
  std::vector<std::unordered_map<uint64_t, std::vector<size_t>>> bands_{kMinHashes / kBandRows};
  long next_id_ = 0;
};

}  // namespace kforge
