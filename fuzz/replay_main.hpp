// Replay driver shared by the fuzz targets (built with -DTLRT_FUZZ_REPLAY): runs every file named
// on the command line, or in a directory named there, through LLVMFuzzerTestOneInput.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>
#include <dirent.h>
#include <sys/stat.h>

static int run_file(const char *path) {
  FILE *f = std::fopen(path, "rb");
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", path);
    return 1;
  }
  std::vector<uint8_t> buf;
  int c;
  while ((c = std::fgetc(f)) != EOF) buf.push_back((uint8_t)c);
  std::fclose(f);
  LLVMFuzzerTestOneInput(buf.data(), buf.size());
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int a = 1; a < argc; ++a) {
    struct stat st;
    if (stat(argv[a], &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR *d = opendir(argv[a]);
      while (dirent *e = d ? readdir(d) : nullptr) {
        if (e->d_name[0] == '.') continue;
        std::string p = std::string(argv[a]) + "/" + e->d_name;
        bad += run_file(p.c_str());
        ++files;
      }
      if (d) closedir(d);
    } else {
      bad += run_file(argv[a]);
      ++files;
    }
  }
  std::printf("replayed %d inputs\n", files);
  return (bad == 0 && files > 0) ? 0 : 1;
}
