"""Each wire error code maps to its exception; no agent is needed."""

import unittest

import lockagent
from lockagent._wire import Reply


class ErrorsTest(unittest.TestCase):
    def test_settings_is_settings_differ(self):
        text = "lease=20s here, the masters record lease=15s (on 3 of 3)"
        err = Reply("ERR", ["SETTINGS"] + text.split(), []).error()
        self.assertIsInstance(err, lockagent.SettingsDiffer)
        self.assertNotIsInstance(err, lockagent.NoQuorum)
        self.assertEqual(err.code, "SETTINGS")
        self.assertIn("the masters record lease=15s", str(err))


if __name__ == "__main__":
    unittest.main()
