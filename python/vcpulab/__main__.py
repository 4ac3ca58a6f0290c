from vcpulab.cli import entry

entry()
