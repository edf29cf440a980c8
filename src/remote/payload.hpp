#pragma once
// encoded_payload: a message as it arrived from another node, not yet decoded. The I/O thread
// puts it in the target's envelope (with envelope::flag_encoded); the target's turn decodes it
// (remote_node::decode) just before the handler, so the I/O thread only frames and routes.
//
// It also carries the message's credit: the bytes the sender counted against its window. They
// are granted back when the payload goes, whichever way it goes (decoded, dead-lettered,
// drained with a stopped actor's mailbox): its destructor grants them, so no path can leak
// the sender's window.
//
// Contract: owned by one envelope, moved with it; destroyed on whichever thread drops it.

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>

namespace akt::remote::detail {

// Where credits go back to (the inbound connection the message came in on).
class credit_sink {
 public:
  virtual void grant(std::uint32_t bytes) noexcept = 0;

 protected:
  ~credit_sink() = default;
};

class encoded_payload {
 public:
  // Payloads up to this size live inside the message (no allocation per small message).
  static constexpr std::size_t k_inline = 24;

  encoded_payload(std::uint64_t type_id, std::span<const unsigned char> bytes,
                  std::shared_ptr<credit_sink> credit, std::uint32_t credit_bytes)
      : type_id_(type_id),
        size_(static_cast<std::uint32_t>(bytes.size())),
        credit_bytes_(credit_bytes),
        credit_(std::move(credit)) {
    if (size_ <= k_inline) {
      if (size_ != 0) std::memcpy(inline_, bytes.data(), size_);
    } else {
      heap_ = new unsigned char[size_];
      std::memcpy(heap_, bytes.data(), size_);
    }
  }
  encoded_payload(encoded_payload&& o) noexcept
      : type_id_(o.type_id_),
        size_(o.size_),
        credit_bytes_(std::exchange(o.credit_bytes_, 0)),
        credit_(std::move(o.credit_)) {
    if (size_ <= k_inline)
      std::memcpy(inline_, o.inline_, size_);
    else
      heap_ = std::exchange(o.heap_, nullptr);
    o.size_ = 0;
  }
  encoded_payload(const encoded_payload&) = delete;
  encoded_payload& operator=(const encoded_payload&) = delete;
  encoded_payload& operator=(encoded_payload&&) = delete;
  ~encoded_payload() {
    if (size_ > k_inline) delete[] heap_;
    if (credit_ && credit_bytes_ != 0) credit_->grant(credit_bytes_);
  }

  std::uint64_t type_id() const noexcept { return type_id_; }
  std::span<const unsigned char> bytes() const noexcept {
    return {size_ <= k_inline ? inline_ : heap_, size_};
  }

 private:
  std::uint64_t type_id_;
  std::uint32_t size_;
  std::uint32_t credit_bytes_;
  std::shared_ptr<credit_sink> credit_;
  union {
    unsigned char inline_[k_inline];
    unsigned char* heap_;
  };
};

}  // namespace akt::remote::detail
