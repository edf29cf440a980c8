// Writes the seed corpus of akt_fuzz_frame: one valid frame of every type (and every built-in
// payload), and streams of all of them under each way of splitting reads. Run by hand when the
// wire format changes:
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target akt_fuzz_make_corpus
//   ./build/fuzz/fuzz/akt_fuzz_make_corpus fuzz/corpus/frame
//
// Each file is what frame_fuzz.cpp reads: a mode byte (how reads are split), then the stream.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <akt/remote/serialization.hpp>

#include "remote/frame.hpp"
#include "remote/wire.hpp"
#include "remote/wire.pb.h"

namespace {

using namespace akt::remote;
using namespace akt::remote::detail;
using bytes = std::vector<unsigned char>;

bool write_file(const std::string& dir, const std::string& name, std::uint8_t mode,
                const bytes& stream) {
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out.put(static_cast<char>(mode));
  out.write(reinterpret_cast<const char*>(stream.data()),
            static_cast<std::streamsize>(stream.size()));
  return static_cast<bool>(out);
}

void must(const akt::error& e) {
  if (e) {
    std::fprintf(stderr, "make_corpus: %s\n", e.message().c_str());
    std::exit(1);
  }
}

bytes tell_of(akt::message m, envelope_fields f = {}) {
  byte_writer w;
  const serializer* s = find_serializer(m);
  if (s == nullptr) must(akt::errc::not_serializable);
  f.target_uid = 7;
  f.sender_uid = 3;
  must(encode_tell(w, 0, f, *s, m));
  return w.take();
}

template <class Proto>
bytes proto_frame(frame_type type, std::uint64_t correlation, const Proto& p) {
  byte_writer w;
  must(encode_proto_frame(w, type, lane::control, correlation, p));
  return w.take();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus folder>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  must(register_protobuf<akt::remote::hello>());
  must(register_protobuf<akt::remote::control>());
  must(register_protobuf<akt::remote::terminated>());

  std::vector<std::pair<std::string, bytes>> frames;

  // Tells of every built-in, to a uid.
  frames.emplace_back("tell-string", tell_of(std::string("hello")));
  frames.emplace_back("tell-int32", tell_of(std::int32_t{-5}));
  frames.emplace_back("tell-int64", tell_of(std::int64_t{1} << 40));
  frames.emplace_back("tell-longlong", tell_of(-9LL));
  frames.emplace_back("tell-uint32", tell_of(std::uint32_t{5}));
  frames.emplace_back("tell-uint64", tell_of(~std::uint64_t{0}));
  frames.emplace_back("tell-bool", tell_of(true));
  frames.emplace_back("tell-double", tell_of(2.5));
  frames.emplace_back("tell-bytes", tell_of(std::vector<std::uint8_t>{0, 1, 255}));
  {
    // A traced tell: the W3C trace context after the flags.
    envelope_fields f;
    for (std::size_t i = 0; i < f.trace_id.size(); ++i)
      f.trace_id[i] = static_cast<std::uint8_t>(i + 1);
    f.trace_span_id = 0x0102030405060708ull;
    f.trace_flags = 1;
    frames.emplace_back("tell-traced", tell_of(std::string("traced"), f));
  }
  akt::remote::hello payload;
  payload.set_system("in-a-tell");
  frames.emplace_back("tell-protobuf", tell_of(payload));

  // An acknowledged grain tell with a deadline, an ask to a grain.
  {
    envelope_fields f;
    f.target_kind = envelope_target::grain;
    f.target_grain = "counter/a";
    f.flags = k_envelope_acknowledged;
    f.deadline_left_ns = 2'000'000'000;
    byte_writer w;
    must(encode_tell(w, 11, f, *find_serializer(akt::message(1)), akt::message(1)));
    frames.emplace_back("tell-grain-ack", w.take());
    must(encode_ask(w, 12, f, *find_serializer(akt::message(std::string())),
                    akt::message(std::string("q"))));
    frames.emplace_back("ask-grain", w.take());
  }
  {
    byte_writer w;
    must(encode_reply(w, 12, *find_serializer(akt::message(std::string())),
                      akt::message(std::string("answer"))));
    frames.emplace_back("reply", w.take());
    encode_error_reply(w, 13, akt::errc::mailbox_full, "mailbox of /user/a is full", true);
    frames.emplace_back("error-reply", w.take());
    encode_credit(w, lane::ordinary, 65536);
    frames.emplace_back("credit", w.take());
    encode_ping(w, lane::control, 1);
    frames.emplace_back("ping", w.take());
    encode_pong(w, lane::control, 1);
    frames.emplace_back("pong", w.take());
  }

  akt::remote::hello hello;
  hello.set_min_version(1);
  hello.set_max_version(1);
  hello.set_system("sys");
  hello.set_incarnation(0x0123456789abcdefull);
  hello.set_host("127.0.0.1");
  hello.set_port(9000);
  hello.set_lane(1);
  hello.set_max_frame_bytes(1 << 20);
  hello.set_window_bytes(1 << 22);
  frames.emplace_back("hello", proto_frame(frame_type::hello, 0, hello));
  akt::remote::hello_ack ack;
  ack.set_system("sys");
  ack.set_incarnation(42);
  ack.set_max_frame_bytes(1 << 20);
  ack.set_window_bytes(1 << 22);
  frames.emplace_back("hello-ack", proto_frame(frame_type::hello_ack, 0, ack));
  akt::remote::hello_reject reject;
  reject.set_reason("wrong system");
  frames.emplace_back("hello-reject", proto_frame(frame_type::hello_reject, 0, reject));
  akt::remote::control control;
  control.mutable_lookup()->set_name("echo");
  frames.emplace_back("control-lookup", proto_frame(frame_type::control, 21, control));
  control.mutable_watch()->set_target_uid(7);
  control.mutable_watch()->set_watcher_uid(8);
  frames.emplace_back("control-watch", proto_frame(frame_type::control, 22, control));
  control.mutable_unwatch()->set_target_uid(7);
  frames.emplace_back("control-unwatch", proto_frame(frame_type::control, 23, control));
  control.mutable_spawn()->set_kind("worker");
  control.mutable_spawn()->set_name("w1");
  frames.emplace_back("control-spawn", proto_frame(frame_type::control, 24, control));
  control.mutable_stop()->set_target_uid(7);
  frames.emplace_back("control-stop", proto_frame(frame_type::control, 25, control));
  akt::remote::control_reply reply;
  reply.set_found(true);
  reply.set_uid(7);
  reply.set_path("/user/echo");
  frames.emplace_back("control-reply", proto_frame(frame_type::control_reply, 21, reply));
  akt::remote::terminated terminated;
  terminated.set_uid(7);
  terminated.set_reason_code(1);
  terminated.set_detail("stopped");
  frames.emplace_back("terminated", proto_frame(frame_type::terminated, 0, terminated));

  bool ok = true;
  bytes all;
  for (const auto& [name, frame] : frames) {
    ok = write_file(dir, name, 0, frame) && ok;
    all.insert(all.end(), frame.begin(), frame.end());
  }
  // The whole conversation under each split, and under the 64-byte body limit.
  ok = write_file(dir, "stream-bytewise", 1, all) && ok;
  ok = write_file(dir, "stream-7", 2, all) && ok;
  ok = write_file(dir, "stream-random", 3, all) && ok;
  ok = write_file(dir, "stream-small-limit", 0x83, all) && ok;
  if (!ok) {
    std::fprintf(stderr, "make_corpus: could not write into %s\n", dir.c_str());
    return 1;
  }
  std::printf("make_corpus: %zu files in %s\n", frames.size() + 4, dir.c_str());
  return 0;
}
