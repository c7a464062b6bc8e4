import * as Memory from "../../src/search/Memory.js"
import { conformance } from "./conformance/suite.js"

conformance("memory", () => Memory.layer)
