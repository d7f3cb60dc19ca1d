// Output-read tokens (rpc/output_token.h): what a worker accepts and everything it refuses.
#include "rpc/output_token.h"

#include <gtest/gtest.h>

#include <string>

namespace regent::rpc {
namespace {

constexpr int64_t kNow = 1'800'000'000;

const AttemptId kAttempt(0x0123456789abcdefULL, 0xfedcba9876543210ULL);
const ResourceId kWorker(1, 2);
const RegistrationId kRegistration(3, 4);

OutputTokenSigner signer(uint64_t epoch = 7) {
  return OutputTokenSigner(epoch, std::string(kOutputKeySize, 'k'));
}

OutputReadKey keyOf(const OutputTokenSigner& signing, const ResourceId& worker = kWorker) {
  return OutputReadKey{signing.epoch(), signing.workerKey(worker, kRegistration)};
}

// A token of `signing` for kAttempt on kWorker in kRegistration.
std::string sign(const OutputTokenSigner& signing, OutputStreamSet streams, int64_t nowSeconds) {
  return signing.sign(kWorker, kRegistration, kAttempt, streams, nowSeconds);
}

std::string errorOf(const Status& status) { return status.ok() ? "" : status.error().message; }

TEST(OutputToken, SignedTokenIsAcceptedByItsWorkerForItsAttemptAndStream) {
  const auto signing = signer();
  const std::string token = sign(signing, OutputStreamSet::kStdout, kNow);
  EXPECT_EQ(token.size(), kOutputTokenLength);
  EXPECT_EQ(token.find_first_not_of(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
            std::string::npos);
  EXPECT_TRUE(
      verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStdout, kNow).ok());
  EXPECT_TRUE(verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStdout,
                                kNow + kOutputTokenTtlSeconds - 1)
                  .ok());
}

TEST(OutputToken, ParseReturnsTheClaimsItWasSignedWith) {
  const OutputTokenClaims claims{.epoch = 42,
                                 .attempt = kAttempt,
                                 .streams = OutputStreamSet::kStderr,
                                 .expiresAtSeconds = kNow};
  auto parsed = parseOutputToken(encodeOutputToken(claims, std::string(32, 'w')));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value().claims.epoch, 42u);
  EXPECT_EQ(parsed.value().claims.attempt, kAttempt);
  EXPECT_EQ(parsed.value().claims.streams, OutputStreamSet::kStderr);
  EXPECT_EQ(parsed.value().claims.expiresAtSeconds, kNow);
  EXPECT_EQ(parsed.value().signature.size(), 32u);
}

TEST(OutputToken, BothStreamsCoverStdoutAndStderr) {
  const auto signing = signer();
  const std::string token = sign(signing, OutputStreamSet::kBoth, kNow);
  EXPECT_TRUE(
      verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStdout, kNow).ok());
  EXPECT_TRUE(
      verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStderr, kNow).ok());
}

TEST(OutputToken, ExpiredTokenIsRefused) {
  const auto signing = signer();
  const std::string token = sign(signing, OutputStreamSet::kStdout, kNow);
  const Status status = verifyOutputToken(token, keyOf(signing), kAttempt,
                                          OutputStreamSet::kStdout, kNow + kOutputTokenTtlSeconds);
  EXPECT_NE(errorOf(status).find("expired"), std::string::npos) << errorOf(status);
}

TEST(OutputToken, TokenExpiringBeyondTtlAndSkewIsRefused) {
  // A leader whose clock runs far ahead of the worker's.
  const auto signing = signer();
  const OutputTokenSigner longest(7, std::string(kOutputKeySize, 'k'), kOutputTokenMaxTtlSeconds);
  const std::string token = sign(longest, OutputStreamSet::kStdout,
                                         kNow + kOutputTokenMaxSkewSeconds + 1);
  const Status status =
      verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStdout, kNow);
  EXPECT_NE(errorOf(status).find("beyond"), std::string::npos) << errorOf(status);
}

TEST(OutputToken, TokenSignedWithAnotherKeyIsRefused) {
  const auto signing = signer();
  const OutputTokenSigner other(7, std::string(kOutputKeySize, 'x'));
  const std::string token = sign(other, OutputStreamSet::kStdout, kNow);
  const Status status =
      verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStdout, kNow);
  EXPECT_NE(errorOf(status).find("signature does not verify"), std::string::npos)
      << errorOf(status);
}

TEST(OutputToken, TokenForAnotherWorkerIsRefused) {
  // A worker's key signs only its own attempts: another worker cannot mint tokens for this one.
  const auto signing = signer();
  const std::string token =
      signing.sign(ResourceId(3, 4), kRegistration, kAttempt, OutputStreamSet::kStdout, kNow);
  EXPECT_FALSE(
      verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStdout, kNow).ok());
}

TEST(OutputToken, TokenForAnotherRegistrationOfTheWorkerIsRefused) {
  // A worker that registered again (a new process, or another under its resource id) holds
  // another key: tokens signed for the earlier registration stop working.
  const auto signing = signer();
  const std::string token =
      signing.sign(kWorker, RegistrationId(5, 6), kAttempt, OutputStreamSet::kStdout, kNow);
  EXPECT_FALSE(
      verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStdout, kNow).ok());
}

TEST(OutputToken, TokenOfAnotherEpochIsRefusedNamingBoth) {
  const auto older = signer(6);
  const auto current = signer(7);
  const std::string token = sign(older, OutputStreamSet::kStdout, kNow);
  const Status status =
      verifyOutputToken(token, keyOf(current), kAttempt, OutputStreamSet::kStdout, kNow);
  EXPECT_NE(errorOf(status).find("epoch 6"), std::string::npos) << errorOf(status);
  EXPECT_NE(errorOf(status).find("epoch 7"), std::string::npos) << errorOf(status);
}

TEST(OutputToken, TokenForAnotherAttemptIsRefused) {
  const auto signing = signer();
  const std::string token = sign(signing, OutputStreamSet::kBoth, kNow);
  const Status status = verifyOutputToken(token, keyOf(signing), AttemptId(9, 9),
                                          OutputStreamSet::kStdout, kNow);
  EXPECT_NE(errorOf(status).find("for attempt " + kAttempt.toHex()), std::string::npos)
      << errorOf(status);
}

TEST(OutputToken, TokenForStdoutDoesNotReadStderr) {
  const auto signing = signer();
  const std::string token = sign(signing, OutputStreamSet::kStdout, kNow);
  const Status status =
      verifyOutputToken(token, keyOf(signing), kAttempt, OutputStreamSet::kStderr, kNow);
  EXPECT_NE(errorOf(status).find("does not cover stderr"), std::string::npos) << errorOf(status);
}

TEST(OutputToken, AlteredClaimsBreakTheSignature) {
  const auto signing = signer();
  const std::string token = sign(signing, OutputStreamSet::kStdout, kNow);
  // Each claim byte in turn: the expiry, the attempt, the streams.
  for (size_t at : {size_t{40}, size_t{20}, size_t{2}}) {
    std::string altered = token;
    altered[at] = altered[at] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(
        verifyOutputToken(altered, keyOf(signing), kAttempt, OutputStreamSet::kStdout, kNow).ok())
        << "altered at " << at;
  }
}

TEST(OutputToken, TruncatedTokenIsRefusedNamingItsLength) {
  const std::string token =
      signer().sign(kWorker, kRegistration, kAttempt, OutputStreamSet::kStdout, kNow);
  for (size_t length : {size_t{0}, size_t{1}, size_t{44}, kOutputTokenLength - 1}) {
    auto parsed = parseOutputToken(std::string_view(token).substr(0, length));
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.error().message.find(std::to_string(length) + " characters long"),
              std::string::npos)
        << parsed.error().message;
  }
  EXPECT_FALSE(parseOutputToken(token + "A").ok());
}

TEST(OutputToken, BadBase64IsRefused) {
  const std::string token =
      signer().sign(kWorker, kRegistration, kAttempt, OutputStreamSet::kStdout, kNow);
  // Standard base64's characters, padding, whitespace and bytes outside ASCII are not base64url.
  for (char bad : {'+', '/', '=', ' ', '\n', '\0', '\xff'}) {
    std::string altered = token;
    altered[10] = bad;
    auto parsed = parseOutputToken(altered);
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.error().message.find("character 10"), std::string::npos)
        << parsed.error().message;
  }
}

TEST(OutputToken, UnknownVersionAndStreamSetAreRefused) {
  const std::string token = encodeOutputToken(
      OutputTokenClaims{.epoch = 1, .attempt = kAttempt, .expiresAtSeconds = kNow},
      std::string(32, 'w'));
  // Character 1 holds the version's low 2 bits and the stream set's high 4: 'Q' (16) is version
  // 1 with streams below 16; 'g' (32) is version 2.
  ASSERT_EQ(token[1], 'Q');
  std::string version2 = token;
  version2[1] = 'g';
  auto parsed = parseOutputToken(version2);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("version 2"), std::string::npos) << parsed.error().message;

  for (uint8_t streams : {0, 4, 255}) {
    parsed = parseOutputToken(encodeOutputToken(
        OutputTokenClaims{.epoch = 1,
                          .attempt = kAttempt,
                          .streams = static_cast<OutputStreamSet>(streams),
                          .expiresAtSeconds = kNow},
        std::string(32, 'w')));
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.error().message.find("stream set"), std::string::npos)
        << parsed.error().message;
  }
}

}  // namespace
}  // namespace regent::rpc
