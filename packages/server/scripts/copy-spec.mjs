// The server validates requests against openapi/control.yaml at run time;
// the package carries a copy of it so that it works outside the repository.
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

const here = import.meta.dirname;
mkdirSync(join(here, '../openapi'), { recursive: true });
copyFileSync(join(here, '../../../openapi/control.yaml'), join(here, '../openapi/control.yaml'));
