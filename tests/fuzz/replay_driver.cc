// Copyright hopbudget authors.
//
// A standalone driver for the libFuzzer targets in this folder, linked in the
// ordinary (g++) test build instead of libFuzzer, so that every ctest run,
// ASan and UBSan builds included, feeds each parser of untrusted input:
//
//   1. every file of the checked-in corpus, as is;
//   2. then, until --seconds have passed, inputs made from a fixed seed:
//      mutations of the corpus files (bit flips, byte edits, inserted and
//      deleted runs, interesting bytes and digits, splices of two files,
//      truncations) and random byte strings.
//
// It does not search for coverage the way libFuzzer does (scripts/fuzz.sh
// runs that); it replays, and it keeps the invariants each target checks
// (each target calls std::abort() when one breaks) under test on every run.
// Exit status: 0 when every input passed, 1 on bad arguments or an empty or
// missing corpus; a broken invariant aborts the process.
//
//   budget_header_fuzzer_replay --seconds=2 --seed=1 tests/fuzz/corpus/budget_header
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

constexpr size_t kMaxInput = 4096 + 512;  // past every parser's size limit

int Usage(const char* why) {
  std::fprintf(stderr, "error: %s\nusage: <fuzzer>_replay [--seconds=S] [--seed=N] CORPUS_DIR\n",
               why);
  return 1;
}

// The input being run, for the abort handler.
const Bytes* g_current = nullptr;

// On abort (a broken invariant), writes the input that caused it to stderr,
// hex-escaped, with write(2) only.
void PrintInputOnAbort(int) {
  static const char kHex[] = "0123456789abcdef";
  const char head[] = "\nreplay_driver: this input broke an invariant (hex): ";
  (void)!write(2, head, sizeof(head) - 1);
  if (g_current != nullptr) {
    for (uint8_t c : *g_current) {
      const char h[2] = {kHex[c >> 4], kHex[c & 15]};
      (void)!write(2, h, 2);
    }
  }
  (void)!write(2, "\n", 1);
  std::signal(SIGABRT, SIG_DFL);
  std::abort();
}

void Run(const Bytes& in) {
  g_current = &in;
  // A copy of exactly the input's size, so that ASan sees a read past it.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[in.size() + (in.empty() ? 1 : 0)]);
  std::copy(in.begin(), in.end(), copy.get());
  LLVMFuzzerTestOneInput(copy.get(), in.size());
  g_current = nullptr;
}

class Mutator {
 public:
  Mutator(uint32_t seed, const std::vector<Bytes>& corpus) : rng_(seed), corpus_(corpus) {}

  Bytes Next() {
    if (Pick(10) == 0) return Random();
    Bytes b = corpus_[Pick(corpus_.size())];
    const size_t edits = 1 + Pick(4);
    for (size_t i = 0; i < edits; ++i) Mutate(b);
    if (b.size() > kMaxInput) b.resize(kMaxInput);
    return b;
  }

 private:
  size_t Pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }
  uint8_t Byte() {
    // Bytes that parsers of text and of protobuf treat specially, often.
    static constexpr uint8_t kInteresting[] = {0,    1,    '-',  '+',  '0',  '9',  ' ',  '=',
                                               ':',  '.',  'e',  0x7f, 0x80, 0xff, 0x08, 0x0a,
                                               0x12, 0x1a, 0x22, 0x28, 0x30, 0x38, 0x42};
    if (Pick(2) == 0) return kInteresting[Pick(sizeof(kInteresting))];
    return static_cast<uint8_t>(Pick(256));
  }
  Bytes Random() {
    Bytes b(Pick(Pick(2) == 0 ? 32 : kMaxInput));
    for (uint8_t& c : b) c = Byte();
    return b;
  }
  void Mutate(Bytes& b) {
    const size_t at = Pick(b.size() + 1);
    switch (Pick(8)) {
      case 0:  // flip a bit
        if (!b.empty()) b[Pick(b.size())] ^= static_cast<uint8_t>(1u << Pick(8));
        break;
      case 1:  // replace a byte
        if (!b.empty()) b[Pick(b.size())] = Byte();
        break;
      case 2:  // insert a run of one byte
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), 1 + Pick(Pick(2) == 0 ? 4 : 300),
                 Byte());
        break;
      case 3: {  // delete a run
        const size_t n = std::min(b.size() - std::min(at, b.size()), 1 + Pick(8));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                b.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      case 4:  // truncate
        b.resize(Pick(b.size() + 1));
        break;
      case 5: {  // splice another corpus file in
        const Bytes& other = corpus_[Pick(corpus_.size())];
        const size_t from = Pick(other.size() + 1);
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at),
                 other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      case 6: {  // duplicate a part of itself (repeated fields, long numbers)
        const Bytes copy(b.begin() + static_cast<std::ptrdiff_t>(at), b.end());
        b.insert(b.end(), copy.begin(), copy.end());
        break;
      }
      default:  // a run of digits
        for (size_t n = 1 + Pick(24); n > 0; --n) {
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(std::min(at, b.size())),
                   static_cast<uint8_t>('0' + Pick(10)));
        }
        break;
    }
  }

  std::mt19937 rng_;
  const std::vector<Bytes>& corpus_;
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2;
  uint32_t seed = 1;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    char* end = nullptr;
    if (a.rfind("--seconds=", 0) == 0) {
      seconds = std::strtod(a.c_str() + 10, &end);
      if (*end != '\0' || !(seconds >= 0 && seconds <= 3600)) return Usage("bad --seconds");
    } else if (a.rfind("--seed=", 0) == 0) {
      const unsigned long v = std::strtoul(a.c_str() + 7, &end, 10);
      if (*end != '\0' || a.size() == 7) return Usage("bad --seed");
      seed = static_cast<uint32_t>(v);
    } else if (a.rfind("--", 0) == 0 || !dir.empty()) {
      return Usage(("unexpected argument " + a).c_str());
    } else {
      dir = a;
    }
  }
  if (dir.empty()) return Usage("no corpus directory");
  // protobuf logs every string field that is not UTF-8; hostile input is
  // full of them, and libFuzzer's own runs drop the output too.
  google::protobuf::SetLogHandler(
      +[](google::protobuf::LogLevel, const char*, int, const std::string&) {});

  std::vector<std::filesystem::path> paths;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) paths.push_back(entry.path());
  }
  if (ec) return Usage(("cannot read " + dir + ": " + ec.message()).c_str());
  if (paths.empty()) return Usage(("empty corpus " + dir).c_str());
  std::sort(paths.begin(), paths.end());  // the same order, so the same inputs, every run
  std::signal(SIGABRT, PrintInputOnAbort);
  std::vector<Bytes> corpus;
  for (const auto& p : paths) {
    std::ifstream f(p, std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    Run(corpus.back());
  }

  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::duration<double>(seconds);
  Mutator mutator(seed, corpus);
  uint64_t runs = 0;
  do {
    // Check the clock once per batch: most inputs take microseconds.
    for (int i = 0; i < 256; ++i, ++runs) Run(mutator.Next());
  } while (std::chrono::steady_clock::now() < until);
  std::printf("%s: %zu corpus files, then %llu generated inputs in %.1f s (seed %u): all passed\n",
              dir.c_str(), corpus.size(), static_cast<unsigned long long>(runs),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              seed);
  return 0;
}
