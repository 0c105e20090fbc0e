// Detection annotations, as convert-annoset and the SSD layers read them from users: the bytes
// as a Pascal VOC XML file, SSD's per-image JSON and TXT boxes, a COCO instances file and a
// label map; and as a serialized AnnotatedDatum, whose boxes go through the box projection of the
// SSD augmentation (crop, emit constraint, mirror). Every file error must name its file.
#include <map>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "io/annotated_transform.hpp"
#include "io/annotation_files.hpp"
#include "io/label_map.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  crema::fuzz::Init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crema;
  const std::map<std::string, int> labels = {{"circle", 1}, {"square", 2}, {"1", 3}};
  const std::string path = fuzz::WriteFile("annotation", data, size);
  AnnotatedDatum datum;
  fuzz::Expect(path, [&] { ReadVocAnnotation(path, labels, 100, 80, &datum); });
  fuzz::Expect(path, [&] { ReadJsonAnnotation(path, labels, 100, 80, &datum); });
  fuzz::Expect(path, [&] { ReadTxtAnnotation(path, 100, 80, &datum); });
  fuzz::Expect(path, [&] {
    CocoInstances coco(path, labels);
    if (coco.Has("a.jpg")) coco.Annotate("a.jpg", 100, 80, &datum);
  });
  fuzz::Expect(path, [&] {
    const LabelMap map = ReadLabelMap(path);
    LabelsByName(map);
    DisplayNamesByLabel(map);
  });

  AnnotatedDatum record;
  if (!record.ParseFromArray(data, static_cast<int>(size))) return 0;
  fuzz::Expect("", [&] {
    std::vector<ObjectBox> objects = ObjectBoxes(record);
    EmitConstraint center, overlap;
    overlap.set_emit_type(EmitConstraint::MIN_OVERLAP);
    overlap.set_emit_overlap(0.5f);
    const boxes::Box crop{0.1f, 0.2f, 0.7f, 0.9f};
    augment::ProjectObjects(objects, crop, &center);
    objects = augment::ProjectObjects(objects, crop, &overlap);
    augment::Mirror(&objects);
  });
  return 0;
}
