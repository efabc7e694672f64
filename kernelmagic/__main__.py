from kernelmagic.cli import main

raise SystemExit(main())
