from jaxpapers.cli import main

raise SystemExit(main())
