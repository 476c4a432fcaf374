#pragma once
// A small pickle machine (protocols 2 to 5, and the few protocol 0/1 opcodes those still
// emit) that builds a value tree (pickle_value.h) and runs no Python: it is how the
// trainer reads Detectron2's and Caffe2's .pkl checkpoints and the data.pkl inside a
// torch.save file without a Python interpreter in the image. Torch-free.
//
// What a call would have made is recorded, not made: GLOBAL/STACK_GLOBAL push a global,
// REDUCE/NEWOBJ make an object from it and its arguments, BUILD gives the object its state,
// APPENDS/SETITEMS on an object are kept on it. A few builtins are evaluated because
// Python's own pickling of plain data goes through them: collections.OrderedDict (a dict),
// _codecs.encode(str, "latin1") and bytes()/bytearray() (bytes: Python 3's protocol 2 has no
// bytes opcode), set()/frozenset() (a set).
//
// Python 2 strings (STRING family) are bytes, as pickle.load(encoding="latin1") sees them
// before decoding; PickleValue::AsText() decodes them as latin1.
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "trainer/model/weights/pickle_value.h"

namespace mrcnn::model::weights {

// Anything the reader rejects: "<source>: pickle opcode 0x52 'R' (REDUCE) at offset 1234:
// <what is wrong>", or "<source>: unknown pickle opcode 0x.. at offset N ...".
class PickleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PickleReadOptions {
  // Named in every message: the file, and for a pickle inside an archive the entry
  // ("model.pth:archive/data.pkl").
  std::string source;
  // Where the pickle starts in the input.
  size_t begin = 0;
  // Called with each persistent id (BINPERSID, PERSID) before it is pushed as a
  // PersistentId value; may throw to reject it. Without a hook a persistent id is an error:
  // plain pickles have none, torch's data.pkl refers to its storages by them.
  std::function<void(const PickleValue& id)> on_persistent_id;
};

// Reads one pickle from `bytes` starting at options.begin, up to and including its STOP.
// The document's Bytes values view into `bytes`, which must outlive it. Throws PickleError
// on anything it does not know (an unknown or unsupported opcode, out-of-band buffers,
// extension codes, protocol 0 text strings), on a truncated or malformed pickle (stack
// underflow, a missing MARK, a memo key never stored, REDUCE on a non-global), and when the
// input ends before STOP.
PickleDocument ReadPickle(std::string_view bytes, const PickleReadOptions& options);

}  // namespace mrcnn::model::weights
