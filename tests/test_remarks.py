"""Remark logs: remarks about kernels a later pass merged anyway are kept, marked superseded, printed apart."""

import json

from fusec.base.remarks import Remark, RemarkLog


def test_settle_marks_remarks_whose_kernels_are_all_gone():
    log = RemarkLog([
        Remark("vertical-fusion", "domain-mismatch", "[s0] vs [s0, 8]", ("@fusec_poi_div_1", "@fusec_red_sum_2")),
        Remark("vertical-fusion", "extern-consumer", "aten.mm.default", ("@fusec_poi_mul_3", "aten.mm.default")),
        Remark("importer", "extern", "aten.cumsum", ("aten.cumsum",)),
    ])
    log.settle({"@g", "@fusec_poi_mul_3", "@fusec_red_div_sum_4"})
    assert [r.superseded for r in log.remarks] == [True, False, False]
    assert [r.code for r in log.active] == ["extern-consumer", "extern"]
    assert log.text().splitlines() == [
        "remark: vertical-fusion: extern-consumer: aten.mm.default [@fusec_poi_mul_3, aten.mm.default]",
        "remark: importer: extern: aten.cumsum [aten.cumsum]",
        "// 1 superseded remark(s): their kernels were merged by a later pass",
        "// remark: vertical-fusion: domain-mismatch: [s0] vs [s0, 8] [@fusec_poi_div_1, @fusec_red_sum_2]",
    ]
    assert [entry["superseded"] for entry in json.loads(log.json())] == [True, False, False]
