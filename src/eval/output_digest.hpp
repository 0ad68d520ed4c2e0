// The digest a server-mode reply carries of its call's output: proof that the executor saw the
// output final before it answered. The judge draws a fresh key for every call; the executor hashes
// the call's whole output (every element, with its position) after the call, on the given stream,
// and reads the result back before it replies; the judge hashes the same slot, with the same key,
// once the calls are over and the output verified. Equal digests mean the output that was verified
// existed, complete, before the reply was sent, so the judge's clock from request to reply holds the
// whole call however early the executor's synchronisation returned (a candidate that patches the
// driver's synchronisation to return at once replies a digest of the poison or of a half-written
// output, and is `forged_reply`). The key is no secret from the candidate (it is in the request): the
// digest is not a signature, only a function of every output element that cannot be had before the
// output is.
//
// A sum (mod 2^64) of one mixed term per element: order-free, so a kernel adds its threads' terms in
// any order, and any change to one element changes the sum (the terms are 64-bit hashes).
#pragma once
#include <cstdint>

#include "eval/arena.hpp"

namespace kforge {

KFORGE_HD inline uint64_t digest_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The term of output element `index` holding the fp16 bits `bits`.
KFORGE_HD inline uint64_t digest_term(uint64_t key, uint64_t index, unsigned short bits) {
  return digest_mix(key ^ digest_mix((index << 16) | bits));
}

// The digest of `n` fp16 elements on the host (the unit tests' reference for the device kernels).
inline uint64_t output_digest_host(const unsigned short* c, uint64_t n, uint64_t key) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; ++i) sum += digest_term(key, i, c[i]);
  return sum;
}

}  // namespace kforge
