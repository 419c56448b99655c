// A torch.export archive (.pt2, torch.export.save): its format and versions checked, the
// serialized ExportedProgram (models/model.json) and the raw bytes of its weights and constants.
// The pickled sample inputs (data/sample_inputs/*.pt) are never read: nothing from the file runs.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "zip_reader.hpp"

namespace emmy::pt2 {

// The versions this reader knows (PyTorch 2.11's torch.export.save). A file of another archive
// version or a newer schema is refused, naming its version and the PyTorch that wrote it.
inline constexpr const char* kArchiveFormat = "pt2";
inline constexpr int kArchiveVersion = 0;
inline constexpr int kSchemaMajor = 8;
inline constexpr int kSchemaMinorMax = 17;

struct StoredTensor {
  std::string entry;    // the archive entry holding its bytes
  nlohmann::json meta;  // the serialized TensorMeta (dtype, sizes, strides, storage_offset)
};

class Archive {
 public:
  explicit Archive(const std::string& path);

  const std::string& path() const { return zip_.path(); }
  const nlohmann::json& program() const {
    return program_;
  }  // the ExportedProgram of models/model.json
  std::string torch_version() const;
  // Weights (parameters and buffers) and lifted constants by fully qualified name.
  const std::map<std::string, StoredTensor>& weights() const { return weights_; }
  const std::map<std::string, StoredTensor>& constants() const { return constants_; }
  // The bytes of a stored tensor, as laid out in the archive (little-endian, its own strides).
  std::string bytes(const StoredTensor& t) const { return zip_.read(t.entry); }

 private:
  void read_tensor_config(const std::string& entry, const std::string& dir,
                          std::map<std::string, StoredTensor>& out);

  ZipReader zip_;
  std::string prefix_;  // "<name>/", the archive's top folder
  nlohmann::json program_;
  std::map<std::string, StoredTensor> weights_, constants_;
};

}  // namespace emmy::pt2
