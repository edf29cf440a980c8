#include "akt/actor/supervisor.hpp"

namespace akt {

std::string_view to_string(directive d) noexcept {
  switch (d) {
    case directive::resume:
      return "resume";
    case directive::restart:
      return "restart";
    case directive::stop:
      return "stop";
    case directive::escalate:
      return "escalate";
  }
  return "?";
}

}  // namespace akt
