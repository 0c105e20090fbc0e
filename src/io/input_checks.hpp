#pragma once
// Hygiene for what comes from users' files.
// `OneLineMessage`: an error text on one line (OpenCV's exception texts end in and may hold
// newlines; names read from files may hold them too): line breaks become spaces.
// Paths read from list files (ImageData's "path label" lines, WindowData's image records) are
// joined to root_folder as Caffe does (root_folder + path). When forbidding path escape
// (CREMA_FORBID_PATH_ESCAPE=1 in the environment, or `crema ... --forbid_path_escape`), a
// listed path must stay inside root_folder: an absolute path, or one whose ".." components climb
// above it, is a ConfigError naming `where` (the list file and line). The check is lexical (it
// does not follow symbolic links) and does not touch the file system.
#include <cstdint>
#include <string>
#include <vector>

namespace crema {

std::string OneLineMessage(const std::string& message);

// A whole file's bytes; RuntimeError "cannot read PATH: reason" when it can't be read.
std::string ReadWholeFile(const std::string& path);

// The product of `dims` read from a file, or -1 when one is negative or the product overflows
// int64 (the caller reports it with the file's name).
int64_t CheckedElementCount(const std::vector<int64_t>& dims);

// The width and height an encoded image's header declares (PNG, JPEG, BMP); false for other
// formats or a header too short or broken to tell (the decoder then judges it).
bool EncodedImageSize(const std::string& bytes, int64_t* width, int64_t* height);
// Before decoding: RuntimeError naming `what` when the header declares more values (width x
// height x `channels`) than a blob may hold (INT_MAX, or CREMA_MAX_BLOB_ELEMENTS), so a hostile
// header is refused before the decoder allocates for it; and for a DICOM file, whose decoder
// allocates what the file declares before any check.
void CheckEncodedImageSize(const std::string& bytes, int channels, const std::string& what);
// The same for an image file: reads the first bytes of `path` (no error when it can't: the
// decoder reports a missing or unreadable file).
void CheckImageFileSize(const std::string& path, int channels, const std::string& what);

bool ForbidPathEscape();
void SetForbidPathEscape(bool forbid);

// A "path label" line of a list file (ImageData's source, convert-imageset's LISTFILE): the label
// is the text after the last space, which must be a whole int32 ("3", "-1"; not "3x", "", or
// 2^31). False (the caller names the file and line) when it is not, or there is no path.
bool SplitPathLabel(const std::string& line, std::string* path, int* label);

// Returns root_folder + path, after the check above when it is on.
std::string ListedPath(const std::string& root_folder, const std::string& path,
                       const std::string& where);

}  // namespace crema
