#pragma once
// compact_string: an immutable string in 16 bytes, for names kept once per actor. Up to 15
// characters live inline; a longer one lives in a heap block of its own. (std::string takes 32
// bytes to hold the same 15 inline characters.)
//
// Representation: byte 15 is the tag. Inline: characters in bytes 0..14, tag = 15 - size (so a
// 15-character string ends in a zero tag). Heap: pointer in bytes 0..7, size in bytes 8..11,
// tag = k_heap.

#include <cstdint>
#include <cstring>
#include <string_view>

namespace akt::detail {

class compact_string {
 public:
  static constexpr std::size_t inline_capacity = 15;

  explicit compact_string(std::string_view s) {
    if (s.size() <= inline_capacity) {
      std::memcpy(bytes_, s.data(), s.size());
      bytes_[15] = static_cast<unsigned char>(inline_capacity - s.size());
      return;
    }
    char* p = new char[s.size()];
    std::memcpy(p, s.data(), s.size());
    const auto size = static_cast<std::uint32_t>(s.size());
    std::memcpy(bytes_, &p, sizeof p);
    std::memcpy(bytes_ + 8, &size, sizeof size);
    bytes_[15] = k_heap;
  }
  compact_string(const compact_string&) = delete;
  compact_string& operator=(const compact_string&) = delete;
  ~compact_string() {
    if (bytes_[15] == k_heap) delete[] heap_data();
  }

  std::string_view view() const noexcept {
    if (bytes_[15] != k_heap)
      return {reinterpret_cast<const char*>(bytes_), inline_capacity - bytes_[15]};
    std::uint32_t size = 0;
    std::memcpy(&size, bytes_ + 8, sizeof size);
    return {heap_data(), size};
  }
  operator std::string_view() const noexcept { return view(); }  // NOLINT: reads like a string
  bool is_inline() const noexcept { return bytes_[15] != k_heap; }

 private:
  static constexpr unsigned char k_heap = 0xFF;
  char* heap_data() const noexcept {
    char* p = nullptr;
    std::memcpy(&p, bytes_, sizeof p);
    return p;
  }
  alignas(8) unsigned char bytes_[16];
};

static_assert(sizeof(compact_string) == 16);

}  // namespace akt::detail
