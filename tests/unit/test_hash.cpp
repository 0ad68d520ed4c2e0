// SHA-256: the FIPS 180-4 example vectors, the padding boundaries, and binary input.
#include <gtest/gtest.h>

#include <string>

#include "core/hash.hpp"

namespace kforge {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the block size, where the padding needs one block or spills into a second.
TEST(Sha256, PaddingBoundaries) {
  struct Case {
    size_t n;
    const char* hex;
  };
  const Case cases[] = {
      {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
      {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
      {63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
      {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
      {65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"},
      {119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"},
      {120, "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98"},
  };
  for (const Case& c : cases) EXPECT_EQ(sha256_hex(std::string(c.n, 'x')), c.hex) << c.n << " bytes";
}

TEST(Sha256, BinaryInput) {
  const std::string small("\x00\xff\x80\n", 4);
  EXPECT_EQ(sha256_hex(small), "6d6f7836f1e146dc0204afb5133dae52fdc05603d8ac2dc793b481b0e0829fd1");
  std::string all;
  for (int rep = 0; rep < 3; ++rep)
    for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(sha256_hex(all), "f3a25aa93aa2fbba28d79260535bbd6a5eb0fc1c24a8b0f04e12b484c1dfe363");
}

TEST(Sha256, LowercaseHexOfFixedLength) {
  std::string h = sha256_hex("kforge");
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(h, sha256_hex("kforgf"));
}

}  // namespace
}  // namespace kforge
